package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentmesh/agentmesh/mesh"
)

// mesh approve talks to the bridge's HTTP API with an approver's token, not
// to NATS with the admin's: the bridge records the token's principal as who
// decided (decision.by, the signed statement, approval_decided).

const approveLong = `List, show and decide the approvals of the mesh.

  mesh approve                 the pending approvals, oldest first (same as list)
  mesh approve show UUID       one approval: tool, arguments, who asked, its decision
  mesh approve yes UUID        approve it
  mesh approve no UUID [--reason TEXT]

Deciding needs a token with the approver or admin role ($MESH_TOKEN or
--token-file); the bridge records its principal as who decided. A decision
on an approval that was already decided says by whom and exits 1. A decision
answers once the resumed turn ends (or the bridge's wait limit passes).`

func approveCommand(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approve [list | show UUID | yes UUID | no UUID [--reason TEXT]]",
		Short: "list, show and decide pending approvals; the decision records who decided",
		Long:  approveLong,
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(cmd *cobra.Command, _ []string) error { return approveList(cmd.Context(), o) },
	}
	o.httpFlags(cmd)
	o.jsonFlag(cmd)
	list := &cobra.Command{
		Use: "list", Short: "the pending approvals, oldest first", Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return approveList(cmd.Context(), o) },
	}
	show := &cobra.Command{
		Use: "show UUID", Short: "one approval", Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return approveShow(cmd.Context(), o, args[0]) },
	}
	var reason string
	decide := func(approved bool) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			return approveDecide(cmd.Context(), o, args[0], approved, reason)
		}
	}
	yes := &cobra.Command{Use: "yes UUID", Short: "approve", Args: usageArgs(cobra.ExactArgs(1)), RunE: decide(true)}
	no := &cobra.Command{Use: "no UUID", Short: "reject", Args: usageArgs(cobra.ExactArgs(1)), RunE: decide(false)}
	for _, c := range []*cobra.Command{yes, no} {
		c.Flags().StringVar(&reason, "reason", "", "why, recorded with the decision")
	}
	for _, c := range []*cobra.Command{list, show, yes, no} {
		o.httpFlags(c)
		o.jsonFlag(c)
		cmd.AddCommand(c)
	}
	return cmd
}

func approveList(ctx context.Context, o *clientOptions) error {
	c, err := o.bridge()
	if err != nil {
		return err
	}
	var out struct {
		Approvals []*mesh.Approval `json:"approvals"`
	}
	if err := c.do(ctx, "GET", "/approvals?status=pending", nil, &out); err != nil {
		return err
	}
	sort.SliceStable(out.Approvals, func(i, j int) bool { return out.Approvals[i].CreatedAt.Before(out.Approvals[j].CreatedAt) })
	if o.json {
		return writeJSON(os.Stdout, out.Approvals)
	}
	if len(out.Approvals) == 0 {
		fmt.Println("no pending approvals")
		return nil
	}
	t := newTable("UUID", "AGE", "ASKED BY", "CONVERSATION", "TOOL", "ARGUMENTS").idColumns(0, 3)
	now := time.Now()
	for _, ap := range out.Approvals {
		t.add(ap.UUID, now.Sub(ap.CreatedAt).Round(time.Second).String(), askedBy(ap), ap.ConversationID, toolOf(ap), oneLine(compactJSON(ap.ToolArgs), 200))
	}
	return t.print(os.Stdout, stdoutWidth())
}

// askedBy is who asked for an approval: the agent, or the remote agent of
// a proxy approval.
func askedBy(ap *mesh.Approval) string {
	if ap.RemoteAgentName != "" {
		return ap.Agent + " for " + ap.RemoteAgentName
	}
	return ap.Agent
}

func toolOf(ap *mesh.Approval) string {
	if ap.Server != "" && ap.Tool != "" {
		return ap.Server + "." + ap.Tool
	}
	return ap.ToolName
}

func getApproval(ctx context.Context, c *bridgeClient, id string) (*mesh.Approval, error) {
	if !wholeID(id) {
		var err error
		if id, err = approvalByPrefix(ctx, c, id); err != nil {
			return nil, err
		}
	}
	var out struct {
		Approval *mesh.Approval `json:"approval"`
	}
	if err := c.do(ctx, "GET", "/approvals/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	if out.Approval == nil {
		return nil, fmt.Errorf("approval %s: empty answer", id)
	}
	return out.Approval, nil
}

// approvalByPrefix is the approval whose id starts with prefix, among the
// newest 500 (the pending ones are what a prefix is shown for).
func approvalByPrefix(ctx context.Context, c *bridgeClient, prefix string) (string, error) {
	var out struct {
		Approvals []*mesh.Approval `json:"approvals"`
	}
	if err := c.do(ctx, "GET", "/approvals?limit=500", nil, &out); err != nil {
		return "", err
	}
	ids := make([]string, 0, len(out.Approvals))
	for _, ap := range out.Approvals {
		ids = append(ids, ap.UUID)
	}
	return byPrefix(prefix, "approval", ids)
}

func approveShow(ctx context.Context, o *clientOptions, id string) error {
	c, err := o.bridge()
	if err != nil {
		return err
	}
	ap, err := getApproval(ctx, c, id)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(os.Stdout, ap)
	}
	printApproval(os.Stdout, ap)
	return nil
}

func printApproval(w io.Writer, ap *mesh.Approval) {
	args, _ := json.MarshalIndent(ap.ToolArgs, "  ", "  ")
	fmt.Fprintf(w, "approval      %s\nstatus        %s\n", ap.UUID, ap.Status)
	fmt.Fprintf(w, "asked by      %s, in conversation %s (run %s)\n", askedBy(ap), ap.ConversationID, ap.RunID)
	fmt.Fprintf(w, "asked at      %s\n", ap.CreatedAt.Local().Format(time.DateTime))
	fmt.Fprintf(w, "tool          %s (%s)\n", bold(toolOf(ap)), ap.ToolName)
	if ap.Description != "" {
		fmt.Fprintf(w, "description   %s\n", ap.Description)
	}
	fmt.Fprintf(w, "arguments\n  %s\n", args)
	if ap.Status != mesh.ApprovalPending {
		fmt.Fprintf(w, "decision      %s\n", decidedText(ap))
	}
}

// approveDecide approves or rejects approval id, bound to the arguments
// it has now (args_hash): a record changed meanwhile is refused.
func approveDecide(ctx context.Context, o *clientOptions, id string, approved bool, reason string) error {
	c, err := o.bridge()
	if err != nil {
		return err
	}
	ap, err := getApproval(ctx, c, id)
	if err != nil {
		return err
	}
	if ap.Status != mesh.ApprovalPending {
		return alreadyDecided(o, ap)
	}
	body := map[string]any{"approved": approved, "by": c.by, "args_hash": ap.ArgsHash}
	if reason != "" {
		body["reason"] = reason
	}
	var out runAnswer
	err = c.do(ctx, "POST", "/approvals/"+url.PathEscape(ap.UUID), body, &out)
	var api *apiError
	if errors.As(err, &api) && api.Code == "approval_decided" {
		var refused struct {
			Approval *mesh.Approval `json:"approval"`
		}
		if json.Unmarshal(api.Body, &refused) == nil && refused.Approval != nil {
			return alreadyDecided(o, refused.Approval)
		}
	}
	if err != nil {
		return err
	}
	decided := out.Approval
	if decided == nil {
		decided = ap
	}
	if o.json {
		return writeJSON(os.Stdout, decided)
	}
	fmt.Printf("%s %s: %s\n", toolOf(decided), decided.UUID, decidedText(decided))
	return nil
}

// alreadyDecided reports a decision that came too late: exit 1.
func alreadyDecided(o *clientOptions, ap *mesh.Approval) error {
	if o.json {
		_ = writeJSON(os.Stdout, ap)
	}
	return fmt.Errorf("approval %s was already %s", ap.UUID, decidedText(ap))
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
