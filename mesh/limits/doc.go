// Package limits keeps what every bridge of a mesh counts together in the
// bucket mesh_limits: request budgets (token buckets) per principal and per
// client address, and the sets of conversations that are active, per owner
// and mesh-wide. Every write is a compare-and-set on the key's revision,
// with a per-key TTL, so two bridges spend one budget and an idle key goes
// away by itself.
package limits
