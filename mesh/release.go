package mesh

// Release is this source tree's release of the mesh, a semantic version.
// CHANGELOG.md says what each release changed; a build stamps the commit it
// was built from beside it (`mesh version`).
const Release = "0.1.0"

// StoreFormat is the version of the formats the mesh keeps in NATS: the
// records of its buckets (conversation heads and messages, approvals, call
// records, the tool catalog), its work items and its events. It goes up
// when a release writes a record the one before it cannot read, and
// CHANGELOG.md says so.
const StoreFormat = 1
