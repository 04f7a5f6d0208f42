// Package bus is how a role talks to the others over NATS: it calls a tool
// of a tool host ([CallTool], [CallToolWatched], on mesh.tool.<server>.<tool>),
// asks the approvers for an approval ([RequestApproval], on
// mesh.approval.<uuid>.request), and publishes a conversation's AG-UI
// events to MESH_EVENTS ([Publisher], [RunEvents]).
//
// A request's error comes back as the [mesh.Error] the responder answered
// with, of the same kind; while no responder answers, requests are sent
// again until their context ends. Nothing here starts a goroutine that
// outlives the call that started it.
package bus
