"""Tests of ``toolvisor.supervisors``: OTP supervision on pykka."""
