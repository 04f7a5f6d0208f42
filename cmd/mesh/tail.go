package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/agentmesh/agentmesh/mesh"
)

// mesh tail reads the events stream over NATS with the admin's credentials,
// like `nats sub 'mesh.evt.>'`: it is the operator's view of every
// conversation (--all, --since), which no user's token on the bridge gives.

const tailLong = `Follow the AG-UI events of a conversation (or of every conversation with
--all), as the MESH_EVENTS stream holds them: one line per event for people
(colours on a terminal), or with --json each event's JSON as published, one
per line: exactly the stored events GET /conversations/{id}/events sends
(those with an id; the bridge also writes the starts and ends that make its
replay a sequence of AG-UI runs).

By default only new events; --from-start replays everything the stream keeps
(7 days by default), --since 5m what the last five minutes published.
--types RUN_FINISHED,TOOL_CALL_START keeps only those types. --no-follow
stops once the stored events are printed. Ctrl-C stops.

It reads NATS as the mesh's admin (<data_dir>/creds/admin.nk, or NATS_NKEY /
NATS_CREDS), like the nats CLI.`

// eventTypes are the types --types accepts.
var eventTypes = []mesh.EventType{
	mesh.EventRunStarted, mesh.EventRunFinished, mesh.EventRunError, mesh.EventStepStarted, mesh.EventStepFinished,
	mesh.EventTextMessageStart, mesh.EventTextMessageContent, mesh.EventTextMessageEnd,
	mesh.EventToolCallStart, mesh.EventToolCallArgs, mesh.EventToolCallEnd, mesh.EventToolCallResult,
	mesh.EventStateSnapshot, mesh.EventStateDelta, mesh.EventMessagesSnapshot, mesh.EventRaw, mesh.EventCustom,
	mesh.EventReasoningStart, mesh.EventReasoningMessageStart, mesh.EventReasoningMessageContent,
	mesh.EventReasoningMessageEnd, mesh.EventReasoningEnd,
}

type tailOptions struct {
	all, fromStart, noFollow bool
	since                    time.Duration
	types                    []string
}

func tailCommand(o *clientOptions) *cobra.Command {
	var t tailOptions
	cmd := &cobra.Command{
		Use:   "tail [CONVERSATION | --all] [--from-start | --since 5m] [--types T,…]",
		Short: "follow the events of a conversation, or of all (pretty or --json)",
		Long:  tailLong,
		Args:  usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			conv := ""
			if len(args) == 1 {
				conv = args[0]
			}
			return runTail(o, t, conv)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&t.all, "all", false, "every conversation's events")
	f.BoolVar(&t.fromStart, "from-start", false, "replay every stored event first")
	f.DurationVar(&t.since, "since", 0, "replay the events of this last while first, e.g. 5m")
	f.StringSliceVar(&t.types, "types", nil, "only these event types, e.g. RUN_FINISHED,TOOL_CALL_START")
	f.BoolVar(&t.noFollow, "no-follow", false, "stop after the stored events")
	o.jsonFlag(cmd)
	_ = cmd.RegisterFlagCompletionFunc("types", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		out := make([]string, len(eventTypes))
		for i, t := range eventTypes {
			out[i] = string(t)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// subjects are the filter subjects of a tail.
func (t tailOptions) subjects(ns mesh.Namespace, conv string) ([]string, error) {
	var types []mesh.EventType
	for _, s := range t.types {
		typ := mesh.EventType(strings.ToUpper(strings.TrimSpace(s)))
		if !slices.Contains(eventTypes, typ) {
			return nil, usageErr("--types: %q is not an AG-UI event type", s)
		}
		types = append(types, typ)
	}
	if len(types) == 0 {
		if t.all {
			return []string{ns.EventsAll()}, nil
		}
		subj, err := ns.EventsOf(conv)
		if err != nil {
			return nil, usageErr("conversation %q: %v", conv, err)
		}
		return []string{subj}, nil
	}
	var out []string
	for _, typ := range types {
		var subj string
		var err error
		if t.all {
			subj, err = ns.EventsOfType(typ)
		} else {
			subj, err = ns.Event(conv, typ)
		}
		if err != nil {
			return nil, usageErr("conversation %q: %v", conv, err)
		}
		out = append(out, subj)
	}
	return out, nil
}

func runTail(o *clientOptions, t tailOptions, conv string) error {
	switch {
	case t.all == (conv != ""):
		return usageErr("name a CONVERSATION or give --all")
	case t.fromStart && t.since != 0:
		return usageErr("--from-start and --since exclude each other")
	case t.since < 0:
		return usageErr("--since must be positive")
	}
	if _, err := t.subjects(mesh.DefaultNamespace(), conv); err != nil {
		return err // a bad type or conversation id, before connecting
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	nc, js, ns, err := o.admin(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	subjects, err := t.subjects(ns, conv)
	if err != nil {
		return err
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverNewPolicy}
	switch {
	case t.fromStart:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	case t.since > 0:
		start := time.Now().Add(-t.since)
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	stream, err := js.Stream(ctx, ns.Stream(mesh.StreamEvents))
	if err != nil {
		return fmt.Errorf("events stream: %w", err)
	}
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("events consumer: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("events consumer: %w", err)
	}
	defer it.Stop()
	if t.noFollow && (cfg.DeliverPolicy == jetstream.DeliverNewPolicy || pendingOf(cons) == 0) {
		return nil
	}
	prefix := ns.Prefix() + ".evt."
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("events: %w", err)
		}
		printTailEvent(o.json, prefix, msg, t.all)
		if md, err := msg.Metadata(); t.noFollow && err == nil && md.NumPending == 0 {
			return nil
		}
	}
}

// pendingOf is how many stored events the consumer has to deliver.
func pendingOf(cons jetstream.Consumer) uint64 {
	if info := cons.CachedInfo(); info != nil {
		return info.NumPending
	}
	return 1 // unknown: read on
}

func printTailEvent(asJSON bool, prefix string, msg jetstream.Msg, withConv bool) {
	if asJSON {
		fmt.Printf("%s\n", msg.Data())
		return
	}
	conv, _, _ := strings.Cut(strings.TrimPrefix(msg.Subject(), prefix), ".")
	var ev mesh.Event
	if err := json.Unmarshal(msg.Data(), &ev); err != nil {
		fmt.Printf("%s %s\n", conv, oneLine(string(msg.Data()), 200))
		return
	}
	fmt.Println(tailLine(conv, ev, withConv))
}
