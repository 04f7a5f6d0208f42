// Package heartbeat is the beat every process of the mesh sends: who it is,
// what state it is in, and proof that its work loop still works.
//
// A [Beat] publishes the node's [mesh.NodeInfo] on mesh.hb.<role>.<node id>
// every interval (1 s by default) and writes it to the mesh_nodes bucket
// under <role>.<node id> with a per-key TTL of three intervals, so the key of
// a node that dies leaves by itself. It answers liveness probes on
// mesh.node.<node id>.probe only while the node's own health check passes
// (a zombie that still beats stays silent), and hands a monitor's restart
// request (mesh.node.<node id>.restart) to the process. The monitor role that
// reads all this is nodes/monitor; `mesh up`'s supervisor lives in cmd/mesh.
//
// [Beat.Run] owns its subscriptions; when its context ends it sends a last
// "draining" beat, removes the node's key and returns nil, so a clean stop is
// not reported down.
package heartbeat
