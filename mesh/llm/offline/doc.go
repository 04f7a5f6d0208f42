// Package offline is the offline planner, the mesh's default model,
// "offline": an [llm.Provider] that needs no API key and no network. It is
// NOT a language model and does not understand language: it is a small,
// deterministic, rule-based planner that maps short imperative requests
// onto the tools it is given, so that the mesh runs end to end (tool
// calls, approvals, loops, streaming, group chats) anywhere, and tests
// get the same answer to the same request every time.
//
// # Quick start
//
//	p := offline.New() // or models.New / models.FromConfig with "offline"
//	resp, err := p.Generate(ctx, llm.Request{
//		Messages: []llm.Message{{Role: llm.RoleUser, Content: "add resource test-2 value 20"}},
//		Tools:    tools, // e.g. resources_add {name, value}
//	})
//	// resp.ToolCalls[0]: resources_add {"name":"test-2","value":20}
//
// The agent runs the call and sends the result back as a RoleTool
// message; the next Generate reports it in words. Read ExampleNew.
//
// # What one call does
//
// Generate looks at the last user message and at what came after it in
// this turn (assistant tool calls and tool results), then does the first
// of these that applies:
//
//  1. Speaker selection (see below): the name of the group member who
//     speaks next, alone.
//  2. Loop goal (see below): a step towards "at least N <things>".
//  3. Tool results since the last user message (or since the last
//     assistant text, which ends a loop iteration): a text report of
//     them, and no further call.
//  4. A greeting, thanks, or a question about the planner ("help", "what
//     can you do", "who are you"), or an empty message: a short text
//     answer; help lists the tools (name and description).
//  5. No tools at all: pass on in text what the earlier steps of a
//     pipeline said (assistant texts after the user message), else the
//     request itself, so that a pipeline of offline nodes still works.
//  6. Otherwise: plan one tool call from the message, or ask for missing
//     arguments, or say that no tool matches and list the tools.
//
// # Intents
//
// The request's first action word names its intent; weak words count only
// when no action word is present:
//
//	read    list ls show get find search display view see count read fetch
//	        lookup look query browse print enumerate open check inspect
//	        describe retrieve tell load return
//	        (weak: what what's which how overview give summary summarize
//	        status)
//	create  add create make insert register put post generate build spawn
//	        append save store write upload import provision (weak: new)
//	update  update set change modify rename edit patch alter adjust
//	        replace increment decrement increase decrease
//	delete  remove delete drop destroy erase purge rm del unregister clear
//	        wipe discard eliminate kill
//
// Phrases: "get rid of" and "clean up" delete, "set up" creates, "make
// sure" is no action. A lone verb is a request: "list" calls the list
// tool.
//
// # Choosing a tool
//
// Each tool is classified the same way, from the words of its name (split
// on _ - . and camelCase): resources_list is read, resources_add create.
// A name with no action word takes the actions its description names, and
// a ReadOnly tool with neither is read. Tools are then scored:
//
//   - +100 when the tool's intent is the request's; a tool whose intents
//     exclude the request's is never chosen;
//   - +20 when the request's verb is in the tool's name (or both search);
//   - +15 for each word of the request that is a noun of the tool's name,
//     singular or plural alike (resource, resources), +3 (at most +9) for
//     words of its description;
//   - hints: +5 ReadOnly (−5 Destructive) for a read, +2 Destructive for a
//     change, +3 ReadOnly when the request names no action.
//
// A tool must match the intent or a name noun. Among the best-scored
// tools, the first whose required arguments are all found wins.
//
// # Arguments
//
// Arguments come from the words of the request, guided by each property's
// JSON Schema type and name (its last camelCase word decides: entityNames
// is a list of names). Each word fills at most one property. In order:
//
//  1. A keyword and its value: the property's name ("value 42", "value=42",
//     "value: 42", "value of 42", "name foo"), or a cue word before it:
//     "named X", "called X" (names; for a regular-expression property the
//     exact pattern ^X$, with X quoted by regexp.QuoteMeta), "matching X"
//     (X as written), "containing X" and "like X" (X quoted), and for
//     search terms (query, filter, search …) also "for X" and "about X".
//     Integers and numbers need a number; strings refuse fillers.
//  2. A number property still empty takes the only number left in the
//     request.
//  3. Words shaped like ids (prefix_0a1b2c…, UUIDs, six or more digits,
//     sixteen or more hex digits) fill id properties, and words shaped like
//     paths (with / or \, or starting with ~ or .) fill path properties.
//  4. Free words fill the property that names the target: the first word
//     after the verb that is not a filler ("a", "an", "the", "new", "me",
//     "all", "please" …), not a noun for the kind of thing (the tool's name
//     nouns, and resource, item, server, entity, node …), not a property's
//     keyword and not already used. Case and hyphens are kept ("my-test",
//     "a2a-test-item"). Targets, in order: a name (title, key …); a list of
//     names (all free words); for a delete or update, a regular-expression
//     property as the exact pattern ^name$; a required search term; an id
//     (when required, or for a change to a tool with no name or pattern);
//     a required path or string; a message property (message, task,
//     prompt …) takes the whole request when required or when the tool
//     names no action of its own (an agent reached over A2A); objects and
//     lists of objects are filled the same way, one level down.
//  5. Required lists that may be empty become [], required booleans false.
//
// A read's optional filters (pattern, query …) are set only by a cue: "show
// me all resources" lists everything, "show resources matching test" sets
// pattern "test". When required properties stay empty the planner asks for
// them in text instead of calling: "To add a resource I need: value."; a
// delete or update that found nothing at all asks for one of its
// properties.
//
// # Reports
//
// Tool results are reported in plain words, one paragraph each: a list
// result ({"resources": [...], "count": 2} or a bare array) as its count
// and items (name, value, other details, id); an object from a create as
// "Created resource test-1 (value 42, id res_…)."; a removal count as
// "Removed 2 resources."; an error as "The tool X failed: <text>"; and a
// result whose text starts with "rejected" or "cancelled" as "The
// operation was cancelled: X was not approved.". The raw result follows
// the report when shorter than 2000 characters, so the data is visible.
// MCP CallToolResult JSON is unwrapped to its structured content or text.
//
// # Loops
//
// When the tools include exit_loop and the user's message (or else the
// system prompt) states a goal, "at least N <things>", "N or more
// <things>" or "minimum of N <things>", and there are a read and a create
// tool for <things>, each iteration lists the things, then calls exit_loop
// when there are at least N, or else creates one named "<thing>-<k>" with
// value k*10 (k = count+1, a higher k when the name is taken) and ends
// the iteration with text, or calls exit_loop at once when that one was
// the last needed. After exit_loop's result it answers in text.
//
// # Speaker selection
//
// A speaker selection ([llm.Selection], the request whose system prompt
// has the line llm.SelectorInstruction, "Reply with the name of the next
// speaker only.", after a list of participants "- <name>: <description>";
// a group chat's llm strategy sends one) asks who speaks next. The planner
// reads it with [llm.ReadSelection] and answers with one participant's
// name and nothing else, and calls no tool. It routes the last message of
// the selection's history with text: the last user or assistant message,
// not counting a user message that is llm.SelectorQuestion ("Who speaks
// next?"), without the "<name>: " that starts a member's answer. Each
// word of that message that is not a filler scores +2 for a participant
// whose name has it and +1 for one whose description has it, singular and
// plural alike ("deploys" finds "deploy"). The best score wins, ties by
// list order, but never the author of the last assistant message while
// another participant scores. When no word scores, the first listed
// participant that did not speak last answers. A "- <name>: …" line whose
// name is not letters, digits, '_' and '-' is not a participant.
//
// # Streaming and usage
//
// Text is delivered through Request.OnText in chunks of a few words whose
// concatenation is Response.Text. Usage counts four characters as a
// token. Generate returns ctx's error when ctx ends, also between chunks.
//
// # Limits
//
// It reads words, not meaning. One request is one intent and one tool
// call per answer, never parallel calls: "list the resources then add
// test-3 value 3" lists, "remove test-1 and test-2" removes test-1. It
// knows no negation ("don't delete test-1" deletes test-1), no reference
// to earlier turns ("delete it" asks what to delete), no arithmetic, no
// language but English. It never invents a value the request does not
// hold, except the names and values a loop goal creates and required
// empty lists and false. Its usage counts are estimates. Use a language
// model for anything else; the planner is for running the mesh without
// one, for demos and for tests.
//
// Generate runs on the caller's goroutine and starts none. Nothing of a
// call is kept for the next but a bounded cache of the tools' profiles
// (how each tool was classified); the planner is safe for concurrent use.
package offline
