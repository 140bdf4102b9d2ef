package decision

import (
	"strings"
	"unicode/utf8"
)

// A message goes whole into the VM's status (a condition's message takes 32 KiB), and into an
// Event's note, which the Events API bounds to a kilobyte: a message of long names (a VM's is
// up to 253 bytes, and its server's and disk's names repeat it) passes that, and is cut for the
// note (reconcile's events.go) as Abridge cuts it, so that no command the message gives is
// broken.

// abridged marks where Abridge cut a message.
const abridged = " [...] "

// Abridge is msg cut to at most limit bytes (an Event's note, which the Events API bounds),
// and whole when it fits. It cuts the middle out, not the end: a message says first what
// happened and last what to do, often a command to run (kubectl vm restart NAME -n NS), which
// a cut at the end broke mid-name, leaving a command that could act on another VM. It keeps
// the start and the end, about half each, cut between words and marked (abridged), and never
// cuts inside a command (commands): the end is widened back to the start of a command the cut
// would break, as long as the start keeps a quarter of the note (what happened), else that
// command is left out whole; the start ends before a command it would break. limit is far
// more than the marker: a note of a kilobyte.
func Abridge(msg string, limit int) string {
	if len(msg) <= limit {
		return msg
	}
	room := limit - len(abridged)
	cmds := commands(msg)
	tail := wordAfter(msg, len(msg)-(room-room/2)) // msg[tail:] is kept, and msg[:head]
	for _, c := range cmds {
		if c[0] < tail && tail < c[1] {
			tail = c[1] // the command is left out, unless the end can hold it
			if len(msg)-c[0]+1 <= room-room/4 {
				tail = c[0]
				if tail > 0 && msg[tail-1] == '(' {
					tail-- // (kubectl vm stop NAME -n NS) keeps its parenthesis
				}
			}
		}
	}
	head := wordBefore(msg, room-(len(msg)-tail))
	for _, c := range cmds {
		if c[0] < head && head < c[1] {
			head = c[0]
		}
	}
	return strings.TrimRight(msg[:head], " ") + abridged + strings.TrimLeft(msg[tail:], " ")
}

// wordAfter is where the word after msg[i] starts, when one does within a few bytes, else the
// first character's boundary from i; wordBefore is where the word before msg[i] ends, or the
// last boundary up to i.
func wordAfter(msg string, i int) int {
	if j := strings.IndexByte(msg[i:], ' '); j >= 0 && j < 24 {
		return i + j + 1
	}
	for i < len(msg) && !utf8.RuneStart(msg[i]) {
		i++
	}
	return i
}

func wordBefore(msg string, i int) int {
	if j := strings.LastIndexByte(msg[:i], ' '); j >= 0 && i-j < 24 {
		return j
	}
	for i > 0 && !utf8.RuneStart(msg[i]) {
		i--
	}
	return i
}

// commands are the spans [start, end) of the commands in msg, as the messages write them: from
// "kubectl " to the end of its clause, at "; ", ", ", ": ", " (", a ")" that closes a
// parenthesis opened before the command, or the end of msg. A parenthesis the command opens
// ($(date ...), $(kubectl get ...)) is its own, and so is a word in single quotes (a patch's
// JSON); the command a $(...) holds is part of the one around it. A span may take in some of
// the prose after its command (kubectl describe pod NAME -n NS shows ...): it is what is not
// to be cut, and prose kept whole costs bytes only.
func commands(msg string) [][2]int {
	var spans [][2]int
	for from := 0; ; {
		i := strings.Index(msg[from:], "kubectl ")
		if i < 0 {
			return spans
		}
		start := from + i
		end, depth, quoted := len(msg), 0, false
	scan:
		for j := start; j < len(msg); j++ {
			switch c := msg[j]; {
			case quoted:
				quoted = c != '\''
			case c == '\'' && (msg[j-1] == ' ' || msg[j-1] == '='): // a quote opens a word (node's does not)
				quoted = true
			case c == '(' && msg[j-1] == ' ' && depth == 0:
				end = j - 1
				break scan
			case c == '(':
				depth++
			case c == ')' && depth == 0:
				end = j
				break scan
			case c == ')':
				depth--
			case depth == 0 && c == ';',
				depth == 0 && (c == ',' || c == ':') && j+1 < len(msg) && msg[j+1] == ' ':
				end = j
				break scan
			}
		}
		spans = append(spans, [2]int{start, end})
		from = end
	}
}
