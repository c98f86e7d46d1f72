"""Child process for one hung-tool case: ``python -m bench.competitors._hung_child FW DRIVER VAR``.

Runs one turn whose single tool sleeps ``HANG_SECONDS`` and reports on stdout (JSON lines) when
the framework started, when it handed control back and whether the tool's thread was still
running then. The parent kills this process at its deadline, so nothing here needs a timeout.
"""

import sys

from bench.competitors._driver import HungReport
from bench.competitors._registry import framework_named
from bench.competitors._tools import HangingTool

USAGE = "usage: python -m bench.competitors._hung_child FRAMEWORK DRIVER VARIANT"


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.stderr.write(USAGE + "\n")
        return 2
    framework, driver_name, variant = argv
    driver = framework_named(framework).driver(driver_name)
    if variant not in driver.hung_variants:
        sys.stderr.write(
            f"{driver_name} has no variant {variant!r}: {list(driver.hung_variants)}\n"
        )
        return 2
    report = HungReport(HangingTool())
    try:
        driver.run_hung(variant, report)
    except Exception as error:
        if report.started:
            report.returned(f"raised {error!r}")
        else:
            report.emit("refused", error=repr(error)[:300])
    report.emit("interpreter_exiting")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
