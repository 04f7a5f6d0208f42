package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentmesh/agentmesh/mesh"
)

// mesh fork talks to the bridge's HTTP API, as mesh chat does: the branch
// is the token's principal's, made of a conversation it may read.

const forkLong = `Fork a conversation: a new conversation of yours whose history is the
original's up to a point (shared with it, not copied), with the state the
original had there. The original is not changed.

  mesh fork CONVERSATION --after MESSAGE_ID    keep every message up to and including this one
  mesh fork CONVERSATION --before MESSAGE_ID   keep every message before this one
  mesh fork CONVERSATION --event-seq N         keep what the conversation was once event N was written

With --message, the branch is sent that message at once: --before a user
message and --message new text is that message edited. The branch carries
no pending approval: a call that waited for one is answered there as not
run. Prints the branch's id (and, with --message, the answer).`

func forkCommand(o *clientOptions) *cobra.Command {
	var after, before, message string
	var eventSeq uint64
	cmd := &cobra.Command{
		Use:   "fork CONVERSATION (--after ID | --before ID | --event-seq N) [--message TEXT]",
		Short: "branch a conversation at a message or an event",
		Long:  forkLong,
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			if cmd.Flags().Changed("after") {
				body["after"] = after
			}
			if cmd.Flags().Changed("before") {
				body["before"] = before
			}
			if cmd.Flags().Changed("event-seq") {
				body["event_seq"] = eventSeq
			}
			if len(body) != 1 {
				return usageErr("name one point: --after ID, --before ID or --event-seq N")
			}
			if message != "" {
				body["message"] = message
			}
			return forkRun(cmd.Context(), o, args[0], body)
		},
	}
	cmd.Flags().StringVar(&after, "after", "", "the last message the branch keeps")
	cmd.Flags().StringVar(&before, "before", "", "the first message the branch does not keep")
	cmd.Flags().Uint64Var(&eventSeq, "event-seq", 0, "the event (its stream sequence, the SSE id) the branch is as of")
	cmd.Flags().StringVar(&message, "message", "", "a message sent on the branch at once")
	o.httpFlags(cmd)
	o.jsonFlag(cmd)
	return cmd
}

func forkRun(ctx context.Context, o *clientOptions, conv string, body map[string]any) error {
	c, err := o.bridge()
	if err != nil {
		return err
	}
	var out map[string]any
	if err := c.do(ctx, "POST", "/conversations/"+url.PathEscape(conv)+"/fork", body, &out); err != nil {
		return err
	}
	if o.json {
		return writeJSON(os.Stdout, out)
	}
	var from mesh.ForkPoint
	if raw, err := json.Marshal(out["forked_from"]); err == nil {
		_ = json.Unmarshal(raw, &from)
	}
	id, _ := out["id"].(string)
	fmt.Printf("branch %s of %s", id, from.Conversation)
	if from.Message != "" {
		fmt.Printf(", after message %s", from.Message)
	}
	fmt.Printf(" (event %d)\n", from.EventSeq)
	if res, ok := out["result"].(map[string]any); ok {
		if text, _ := res["response"].(string); text != "" {
			fmt.Println(text)
		}
	} else if status, _ := out["status"].(string); status != "" {
		fmt.Printf("the message is %s; follow it with: mesh tail %s\n", status, id)
	}
	return nil
}
