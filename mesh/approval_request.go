package mesh

// Policies the approver decides by at once, without a person. A call that
// is not read-only but that no person needs to approve still runs only with
// a signed approval: the agent asks for one naming the policy, and the
// approver checks that the policy covers the call before it signs.
const (
	// PolicyNonDestructive covers a tool whose catalog entry (written by the
	// tool host from the server's own annotations) is not destructive:
	// destructiveHint false, e.g. a create that overwrites nothing.
	PolicyNonDestructive = "non_destructive"
	// PolicyAllowDestructive covers a destructive tool called by a step of
	// the agent tree that has allow_destructive: true in the approver's own
	// copy of the configuration.
	PolicyAllowDestructive = "allow_destructive"
)

// PolicyBy is the Decision.By of a policy's decision: "policy:<policy>".
func PolicyBy(policy string) string { return "policy:" + policy }
