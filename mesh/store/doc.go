// Package store keeps the mesh's state in JetStream and creates the
// streams and buckets it lives in.
//
//	SessionStore    conversation heads in mesh_sessions, their messages in MESH_MESSAGES ([MessageLog])
//	ApprovalStore   approvals in mesh_approvals, each believed only under its own key
//	Catalog         the tool catalog in mesh_tools, an entry only under its own key
//	FileStore       conversations' files in the object store mesh_files
//	Nodes           the liveness registry mesh_nodes
//
// Every change is a compare-and-set on the revision read: an update loads
// the value, applies a change function and writes it back, and on a
// conflict reloads and applies the change again ([ErrNoChange] ends it
// without a write). A conversation's messages are appended to the message
// log and never edited; its head lists where the newest are.
//
// [Provision] creates or updates the streams and buckets (an admin's job);
// [Bind] binds those a process [Uses], as its identity allows. [WatchKV]
// follows a bucket's keys, opening its watch again after a reconnect when
// its [KVWatch] asks; it and [FollowNew] run until their context ends.
package store
