// Package memory gives a quiet process's memory back to the system. Every
// role of the mesh, `mesh up` itself and the sample MCP server run an
// [IdleRelease]: once the process has gone quiet after allocating, it
// empties its caches, collects its garbage, returns the free heap and lets
// go of the pages of its program and libraries, which it maps again as it
// touches them ([Release]). The process that runs the embedded NATS
// server also sets Go's memory limit with a [Limit], which keeps room over
// the live heap rather than a fixed bound.
//
// Why: Go keeps a heap at its peak size until the next collection, which an
// idle process runs only every 2 minutes, and then returns memory slowly;
// an idle heap grows with its garbage to twice what it holds alive before it
// collects. And every process maps the pages of the program it touched, at
// least 64 KiB at a time (the kernel's fault-around): the five role
// processes of `mesh up` run one binary, and each kept much of it
// resident, most of it touched once while starting (package initialisers,
// configuration, provisioning) or during a burst, never again while quiet.
package memory
