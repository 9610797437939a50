package sim

import (
	"errors"
	"strings"
)

// splitWords undoes transport.Join: the command line an SSH exec request
// carries, back into its argv. Join writes each element bare (safe
// characters only) or single-quoted, a quote inside as '\”; that and a
// backslash outside quotes is all the shell syntax this needs to read.
// Anything else (a variable, a glob, a redirection) is not what the
// provider sends and stays literal, so it matches no command.
func splitWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\'':
			quoted = false
		case quoted:
			cur.WriteByte(c)
		case c == '\'':
			quoted, inWord = true, true
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, errors.New("unterminated single quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
