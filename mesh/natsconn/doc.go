// Package natsconn opens a role's connection to NATS ([Connect]): with its
// identity and inbox, reconnecting for as long as the process lives, and
// through a wire guard that reads the protocol both ways. The guard does
// not send a line longer than the server takes (which would make the server
// close the connection for good), and drops what JetStream pushes to a
// subscription outside the connection's inbox (the server does not check a
// push consumer's deliver subject against its creator's permissions).
package natsconn
