// Package identity says who each process of the mesh is on NATS and what
// it may do.
//
// Every role connects with an nkey of its own, and answers requests with a
// second one, its responder ([Responder]), which may publish nothing but
// answers to inboxes; the admin may do everything ([RoleAdmin]).
// [PermissionsOf] is the one table of what each identity may publish,
// subscribe to, consume, and read or write in which bucket; the embedded
// server and the auth.conf of a plain nats-server are configured from it,
// and [PermissionsMarkdown] renders it for the documentation.
//
// The files: the seeds under a credentials directory ([EnsureSeeds],
// [SeedFile]), the approver's signing key ([EnsureSigningKey]), the route
// password a cluster's servers share ([EnsureSecret]), each written with
// mode 0600 in a directory of mode 0700.
package identity
