// Package contract is an independent Go reading of fixtures/README.md: it decodes every
// version-1 vector strictly, recomputes every hash and name, and compares with the expected
// outcome. Standard library only, so another Go repository can vendor it as is.
package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ContractError carries the stable reason both implementations must agree on.
type ContractError struct {
	Reason  string
	Message string
}

func (e *ContractError) Error() string { return e.Reason + ": " + e.Message }

func fail(reason, format string, args ...any) error {
	return &ContractError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// checkText runs the document-level checks in README order: encoding, syntax, lone surrogate
// escapes, duplicate keys. encoding/json would silently repair or accept each of these.
func checkText(doc []byte) error {
	if !utf8.Valid(doc) {
		return fail("InvalidEncoding", "document is not UTF-8")
	}
	if !json.Valid(doc) {
		return fail("MalformedJSON", "document is not one JSON value")
	}
	if err := checkDepth(doc); err != nil {
		return err
	}
	if err := checkSurrogates(doc); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	return checkDuplicates(dec)
}

// maxDepth bounds nesting below every parser's own limit (Go allows 10000, Python about 1000).
const maxDepth = 32

func checkDepth(doc []byte) error {
	depth, inString := 0, false
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == '{' || c == '['):
			if depth++; depth > maxDepth {
				return fail("MalformedJSON", "nested deeper than %d levels", maxDepth)
			}
		case !inString && (c == '}' || c == ']'):
			depth--
		}
	}
	return nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(v), err == nil
}

// checkSurrogates walks string escapes: a \uD800-\uDBFF escape must be followed by a
// \uDC00-\uDFFF escape, and a low one never stands alone. Go would turn both into U+FFFD.
func checkSurrogates(doc []byte) error {
	inString := false
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		switch {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\':
			i++
			if doc[i] != 'u' {
				continue
			}
			r, _ := hex4(doc[i+1:])
			i += 4
			if r >= 0xDC00 && r <= 0xDFFF {
				return fail("InvalidEncoding", "unpaired low surrogate escape")
			}
			if r >= 0xD800 && r <= 0xDBFF {
				rest := doc[i+1:]
				if len(rest) < 6 || rest[0] != '\\' || rest[1] != 'u' {
					return fail("InvalidEncoding", "unpaired high surrogate escape")
				}
				if low, _ := hex4(rest[2:]); low < 0xDC00 || low > 0xDFFF {
					return fail("InvalidEncoding", "unpaired high surrogate escape")
				}
				i += 6
			}
		}
	}
	return nil
}

// checkDuplicates walks one value token by token; keys compare after unescaping.
func checkDuplicates(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return fail("MalformedJSON", "%v", err)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		if delim == '{' {
			key, err := dec.Token()
			if err != nil {
				return fail("MalformedJSON", "%v", err)
			}
			name := key.(string)
			if seen[name] {
				return fail("DuplicateKey", "key %q repeats", name)
			}
			seen[name] = true
		}
		if err := checkDuplicates(dec); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}
