package contract

import (
	"bytes"
	"encoding/json"
	"strings"
)

type kind int

const (
	kString kind = iota
	kObject
	kObjectArray
)

type field struct {
	name string
	kind kind
	sub  *shape
}

// shape is a document's declared fields in order; version names the field checked first.
type shape struct {
	what    string
	version string
	fields  []field
}

// checkShape applies README steps 4-6 (top-level type, version, unknown and missing fields,
// types in declared order with nested objects checked in place). Values come later.
func checkShape(doc []byte, s *shape) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fail("MalformedJSON", "%v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return fail("WrongType", "%s must be a JSON object", s.what)
	}
	if s.version != "" {
		raw, present := obj[s.version]
		if !present {
			return fail("MissingField", "%s has no %s", s.what, s.version)
		}
		num, isNum := raw.(json.Number)
		if !isNum || strings.ContainsAny(string(num), ".eE") {
			return fail("WrongType", "%s %s must be an integer", s.what, s.version)
		}
		if string(num) != "1" {
			return fail("UnsupportedVersion", "%s %s %s", s.what, s.version, num)
		}
	}
	return checkObject(obj, s)
}

func checkObject(obj map[string]any, s *shape) error {
	declared := map[string]bool{}
	for _, f := range s.fields {
		declared[f.name] = true
	}
	for key := range obj {
		if !declared[key] {
			return fail("UnknownField", "%s has unknown field %q", s.what, key)
		}
	}
	for _, f := range s.fields {
		if _, ok := obj[f.name]; !ok {
			return fail("MissingField", "%s has no %q", s.what, f.name)
		}
	}
	for _, f := range s.fields {
		if f.name == s.version {
			continue
		}
		value := obj[f.name]
		switch f.kind {
		case kString:
			if _, ok := value.(string); !ok {
				return fail("WrongType", "%s %q must be a string", s.what, f.name)
			}
		case kObject:
			sub, ok := value.(map[string]any)
			if !ok {
				return fail("WrongType", "%s %q must be an object", s.what, f.name)
			}
			if err := checkObject(sub, f.sub); err != nil {
				return err
			}
		case kObjectArray:
			items, ok := value.([]any)
			if !ok {
				return fail("WrongType", "%s %q must be an array", s.what, f.name)
			}
			for _, item := range items {
				sub, ok := item.(map[string]any)
				if !ok {
					return fail("WrongType", "%s entry must be an object", s.what)
				}
				if err := checkObject(sub, f.sub); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// decode runs every document-level check, then fills target with exact-name fields only.
func decode(doc []byte, s *shape, target any) error {
	if err := checkText(doc); err != nil {
		return err
	}
	if err := checkShape(doc, s); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	return dec.Decode(target)
}

// canonical is the README's compact form: struct field order, no HTML escaping, no newline.
func canonical(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}
