// Package workloop takes a role's work from the work stream MESH_WORK and
// puts work there.
//
// A [Loop] consumes one durable pull consumer per [Queue]
// (mesh.work.<role>.<name>.*) with a bounded number of workers, keeps each
// item in progress while it is handled (one ticker per queue), and drains when
// its context ends: the items in hand finish within a deadline, the others
// are handed back for redelivery. Run owns every goroutine it starts and
// returns once they are done. See ExampleLoop.
//
// [Publish] enqueues a [mesh.WorkItem] with its deduplication id ([MsgID]),
// so the same turn enqueued twice is stored once.
package workloop
