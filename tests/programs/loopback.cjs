// Preloaded (node --require) into the node servers the tests start: a server listening on a
// port listens on 127.0.0.1 only (the reference MCP server would take every interface), and
// tells the port it got on a line of its own on stderr, {"port": N}, so a test reads where it
// is instead of waiting.
"use strict";
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || /^\d+$/.test(String(args[0]))) {
    if (typeof args[1] !== "string") {
      args.splice(1, 0, "127.0.0.1");
    }
    this.once("listening", () => {
      process.stderr.write(JSON.stringify({ port: this.address().port }) + "\n");
    });
  }
  return listen.apply(this, args);
};
