package offline

import (
	"strconv"
	"strings"
	"unicode"
)

// This file holds the offline planner's vocabulary and tokenizer: how a
// user's message is cut into words and which words mean what.

// intent is what a request wants done to things.
type intent uint8

// Intents. intentNone means the words named no action.
const (
	intentNone intent = iota
	intentRead
	intentCreate
	intentUpdate
	intentDelete
)

func (i intent) String() string {
	switch i {
	case intentRead:
		return "read"
	case intentCreate:
		return "create"
	case intentUpdate:
		return "update"
	case intentDelete:
		return "delete"
	}
	return "none"
}

// mutating reports whether the intent changes things, so a request names
// its target (a name, an id, a pattern).
func (i intent) mutating() bool {
	return i == intentCreate || i == intentUpdate || i == intentDelete
}

// intentSet is a set of intents, one bit each.
type intentSet uint8

func (s intentSet) has(i intent) bool { return s&(1<<i) != 0 }
func (s *intentSet) add(i intent)     { *s |= 1 << i }
func (s intentSet) empty() bool       { return s == 0 }

// verbs are the words that name an intent on their own. They classify both
// the user's message and tool names and descriptions.
var verbs = map[string]intent{
	// read
	"list": intentRead, "ls": intentRead, "show": intentRead, "get": intentRead,
	"find": intentRead, "search": intentRead, "display": intentRead, "view": intentRead,
	"see": intentRead, "count": intentRead, "read": intentRead, "fetch": intentRead,
	"lookup": intentRead, "look": intentRead, "query": intentRead, "browse": intentRead,
	"print": intentRead, "enumerate": intentRead, "open": intentRead, "check": intentRead,
	"inspect": intentRead, "describe": intentRead, "retrieve": intentRead, "tell": intentRead,
	"load": intentRead, "return": intentRead,
	// create
	"add": intentCreate, "create": intentCreate, "make": intentCreate, "insert": intentCreate,
	"register": intentCreate, "put": intentCreate, "post": intentCreate, "generate": intentCreate,
	"build": intentCreate, "spawn": intentCreate, "append": intentCreate, "save": intentCreate,
	"store": intentCreate, "write": intentCreate, "upload": intentCreate, "import": intentCreate,
	"provision": intentCreate,
	// update
	"update": intentUpdate, "set": intentUpdate, "change": intentUpdate, "modify": intentUpdate,
	"rename": intentUpdate, "edit": intentUpdate, "patch": intentUpdate, "alter": intentUpdate,
	"adjust": intentUpdate, "replace": intentUpdate, "increment": intentUpdate,
	"decrement": intentUpdate, "increase": intentUpdate, "decrease": intentUpdate,
	// delete
	"remove": intentDelete, "delete": intentDelete, "drop": intentDelete, "destroy": intentDelete,
	"erase": intentDelete, "purge": intentDelete, "rm": intentDelete, "del": intentDelete,
	"unregister": intentDelete, "clear": intentDelete, "wipe": intentDelete,
	"discard": intentDelete, "eliminate": intentDelete, "kill": intentDelete,
}

// weakVerbs name an intent only when no word of verbs does: "what
// resources are there", "give me an overview", "new resource x value 1".
var weakVerbs = map[string]intent{
	"what": intentRead, "what's": intentRead, "whats": intentRead, "which": intentRead,
	"how": intentRead, "overview": intentRead,
	"give": intentRead, "summary": intentRead, "summarize": intentRead, "status": intentRead,
	"new": intentCreate,
}

// searchVerbs are the read verbs that look for something; a tool whose
// name holds one of them is preferred when the user uses another.
var searchVerbs = map[string]bool{"search": true, "find": true, "lookup": true, "look": true, "query": true}

// fillers are words that are never a value and never a noun: articles,
// pronouns, politeness, connectors.
var fillers = setOfWords(`a an the new me all please pls kindly some any my our us i we you
	it its this that these those one ones with and or to for of in on at from by as is are
	be been can could would will should shall do does did have has had there here then now
	just also give want need let lets let's ok okay full entire every each existing current
	currently what what's whats which how many much whose where who when why whole complete total more
	again too very really maybe available stuff data them they their your up out about
	into via using use thanks something anything everything`)

// connectors may stand between a keyword and its value: "value = 42",
// "value of 42", "value is 42", "value: 42" (the tokenizer drops the
// punctuation of the last).
var connectors = setOfWords(`= : of is to as at equal equals equal-to be was`)

// genericNouns are words users put before a name that say what kind of
// thing it is, whatever the tool calls it: "create a server test-1".
var genericNouns = setOfWords(`resource item entry record object thing element server entity
	node instance document row doc file`)

// greetings make a message a greeting when nothing else is in it.
var greetings = setOfWords(`hi hello hey hallo howdy greetings yo hiya morning evening
	afternoon good thanks thank thx cheers bye goodbye`)

// Property-name heads (last word of a property's name) by what the
// property holds.
var (
	nameHeads    = setOfWords(`name names title titles key keys label labels slug handle username`)
	idHeads      = setOfWords(`id ids uuid uuids identifier identifiers`)
	patternHeads = setOfWords(`pattern patterns regex regexp glob`)
	queryHeads   = setOfWords(`query q search filter term terms keyword keywords contains prefix`)
	messageHeads = setOfWords(`message task prompt input request instruction instructions question goal text`)
	pathHeads    = setOfWords(`path paths file filename files dir directory folder url uri`)
)

// Cue words put before a value of a filter property. How the value
// becomes a regular expression depends on the cue.
var (
	cueRaw    = setOfWords(`matching matches match regex pattern`) // the user wrote a pattern
	cueQuoted = setOfWords(`containing contains like including`)   // a substring
	cueExact  = setOfWords(`named called titled`)                  // the whole name
	cueQuery  = setOfWords(`for about`)                            // a search term (query properties only)
)

func setOfWords(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// word is one token of a user's message.
type word struct {
	raw    string // as written, without surrounding punctuation or quotes
	low    string // lower case
	stem   string // lower case, singular
	quoted bool   // written in quotes: always a value, never a keyword
}

func newWord(raw string, quoted bool) word {
	low := strings.ToLower(raw)
	return word{raw: raw, low: low, stem: stem(low), quoted: quoted}
}

// number parses the word as a number.
func (w word) number() (float64, bool) {
	if w.quoted {
		return 0, false
	}
	f, err := strconv.ParseFloat(w.raw, 64)
	return f, err == nil
}

// integer parses the word as an integer.
func (w word) integer() (int64, bool) {
	if w.quoted {
		return 0, false
	}
	n, err := strconv.ParseInt(w.raw, 10, 64)
	return n, err == nil
}

// tokenizeWords cuts s into words. Quoted text ("…", '…', `…`, “…”) is one
// word. Surrounding punctuation is dropped; hyphens, underscores and dots
// inside a word stay ("test-1", "res_0a1b", "v1.2"). "key=value" and
// "key:value" are two words.
func tokenizeWords(s string) []word {
	var out []word
	rs := []rune(s)
	for i := 0; i < len(rs); {
		r := rs[i]
		if unicode.IsSpace(r) {
			i++
			continue
		}
		if closer, ok := quoteCloser(r); ok {
			if j := indexRune(rs[i+1:], closer); j > 0 {
				out = append(out, newWord(string(rs[i+1:i+1+j]), true))
				i += j + 2
				continue
			}
		}
		j := i
		for j < len(rs) && !unicode.IsSpace(rs[j]) {
			j++
		}
		out = append(out, splitField(string(rs[i:j]))...)
		i = j
	}
	return out
}

func quoteCloser(r rune) (rune, bool) {
	switch r {
	case '"', '\'', '`':
		return r, true
	case '“':
		return '”', true
	case '‘':
		return '’', true
	}
	return 0, false
}

func indexRune(rs []rune, r rune) int {
	for i, x := range rs {
		if x == r {
			return i
		}
	}
	return -1
}

const (
	leadPunct  = `([{<,;!?"'` + "`“‘"
	trailPunct = `)]}>,;!?.:"'` + "`”’"
)

// splitField trims punctuation from one whitespace-separated field and
// splits key=value and key:value.
func splitField(f string) []word {
	f = strings.TrimLeft(f, leadPunct)
	f = strings.TrimRight(f, trailPunct)
	if f == "" {
		return nil
	}
	if k, v, ok := strings.Cut(f, "="); ok && k != "" {
		return append(splitField(k), splitField(v)...)
	}
	if k, v, ok := strings.Cut(f, ":"); ok && isLetters(k) && v != "" && !strings.HasPrefix(v, "/") {
		return append(splitField(k), splitField(v)...)
	}
	return []word{newWord(f, false)}
}

func isLetters(s string) bool {
	for _, r := range s {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return s != ""
}

// stem makes an English plural singular, roughly: resources → resource,
// entities → entity, matches → match. Both sides of every comparison are
// stemmed, so its mistakes cancel out.
func stem(s string) string {
	switch {
	case len(s) > 4 && strings.HasSuffix(s, "ies"):
		return s[:len(s)-3] + "y"
	case len(s) > 4 && (strings.HasSuffix(s, "sses") || strings.HasSuffix(s, "shes") ||
		strings.HasSuffix(s, "ches") || strings.HasSuffix(s, "xes")):
		return s[:len(s)-2]
	case len(s) > 3 && strings.HasSuffix(s, "s") && !strings.HasSuffix(s, "ss") &&
		!strings.HasSuffix(s, "us") && !strings.HasSuffix(s, "is"):
		return s[:len(s)-1]
	}
	return s
}

// plural is the plural of a singular noun, for replies.
func plural(noun string, n int) string {
	if n == 1 || noun == "" {
		return noun
	}
	switch {
	case strings.HasSuffix(noun, "y") && len(noun) > 1 && !strings.ContainsRune("aeiou", rune(noun[len(noun)-2])):
		return noun[:len(noun)-1] + "ies"
	case strings.HasSuffix(noun, "s") || strings.HasSuffix(noun, "x") ||
		strings.HasSuffix(noun, "ch") || strings.HasSuffix(noun, "sh"):
		return noun + "es"
	}
	return noun + "s"
}

// article is "a" or "an" for noun.
func article(noun string) string {
	if noun != "" && strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an"
	}
	return "a"
}

// splitName cuts an identifier into lower-case words: on _ - . / and
// spaces, and at camelCase boundaries ("entityNames" → entity, names;
// "HTTPServer" → http, server).
func splitName(name string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if unicode.IsUpper(r) && len(cur) > 0 {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return out
}

// verbOf is the intent a single word names, and whether it is a strong
// verb (verbs) or a weak one (weakVerbs).
func verbOf(w string) (in intent, strong bool) {
	if in, ok := verbs[w]; ok {
		return in, true
	}
	if in, ok := verbs[stem(w)]; ok && len(w) > 3 {
		return in, true
	}
	if in, ok := weakVerbs[w]; ok {
		return in, false
	}
	return intentNone, false
}

// findIntent is the intent of a message and the index of the word that
// names it (-1 when none does). The first strong verb wins, else the first
// weak one. A few phrases are read whole: "get rid of" and "clean up"
// delete, "set up" creates, "make sure" is no action; end is the index of
// the phrase's last word (at for a single word).
func findIntent(ws []word) (in intent, at, end int) {
	weak, weakAt := intentNone, -1
	for i, w := range ws {
		if w.quoted {
			continue
		}
		next := ""
		if i+1 < len(ws) {
			next = ws[i+1].low
		}
		switch {
		case w.low == "get" && next == "rid":
			end := i + 1
			if i+2 < len(ws) && ws[i+2].low == "of" {
				end = i + 2
			}
			return intentDelete, i, end
		case w.low == "make" && next == "sure":
			continue
		case w.low == "set" && next == "up":
			return intentCreate, i, i + 1
		case w.low == "clean" && next == "up":
			return intentDelete, i, i + 1
		}
		in, strong := verbOf(w.low)
		if in == intentNone {
			continue
		}
		if strong {
			return in, i, i
		}
		if weakAt < 0 {
			weak, weakAt = in, i
		}
	}
	return weak, weakAt, weakAt
}

// looksLikeID reports whether a word is shaped like an identifier rather
// than a name: prefix_0a1b2c3d (six or more characters after the
// underscore), a UUID, a number of six or more digits, or sixteen or more
// hex digits.
func looksLikeID(s string) bool {
	if p, rest, ok := strings.Cut(s, "_"); ok && isLetters(p) && len(p) <= 10 && len(rest) >= 6 && isAlnum(rest) && hasDigit(rest) {
		return true
	}
	if len(s) == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' &&
		isHex(strings.ReplaceAll(s, "-", "")) {
		return true
	}
	if len(s) >= 6 && isDigits(s) {
		return true
	}
	return len(s) >= 16 && isHex(s)
}

// looksLikePath reports whether a word is shaped like a file path or URL.
func looksLikePath(s string) bool {
	return strings.ContainsAny(s, `/\`) || strings.HasPrefix(s, "~") ||
		(strings.HasPrefix(s, ".") && len(s) > 1)
}

func isAlnum(s string) bool {
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

func hasDigit(s string) bool { return strings.IndexFunc(s, unicode.IsDigit) >= 0 }

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

func isHex(s string) bool {
	for _, r := range strings.ToLower(s) {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return s != ""
}

// smallNumbers reads number words in goals ("at least three resources").
var smallNumbers = map[string]int{
	"one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
	"six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
}
