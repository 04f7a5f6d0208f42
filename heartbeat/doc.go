// Package heartbeat keeps the mesh's processes alive: the [Supervisor] that
// `mesh up` uses to run one process per role and restart any that dies.
//
// The supervisor owns one goroutine per child; [Supervisor.Run] returns after
// every child has stopped.
package heartbeat
