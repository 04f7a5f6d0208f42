// Package natsserver runs the embedded NATS server with JetStream that
// `mesh up` and `mesh nats` start ([Start]): the mesh's users and their
// permissions, TLS, a cluster's routes and leaf nodes. [Server.Shutdown]
// stops it and is idempotent.
//
// For a plain nats-server, [AuthConfig] writes the same users and
// permissions as a configuration file to include, and [ClusterAuthConfig]
// the routes' authentication.
package natsserver
