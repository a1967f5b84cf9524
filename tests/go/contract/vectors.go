package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
)

// Vector is one fixture file, decoded with the same strictness as the documents it carries.
type Vector struct {
	Description   string            `json:"description"`
	Category      string            `json:"category"`
	Kind          string            `json:"kind"`
	Document      string            `json:"document"`
	Identity      json.RawMessage   `json:"identity,omitempty"`
	Config        *string           `json:"config,omitempty"`
	Expect        map[string]string `json:"expect,omitempty"`
	Error         string            `json:"error,omitempty"`
	SchemaRejects bool              `json:"schemaRejects,omitempty"`
}

func outcome(v Vector) (map[string]string, error) {
	doc := []byte(v.Document)
	switch v.Kind {
	case "identity":
		id, err := ParseIdentity(doc)
		if err != nil {
			return nil, err
		}
		data := id.CanonicalBytes()
		return map[string]string{
			"canonicalHex": fmt.Sprintf("%x", data),
			"attachmentID": sha256Hex(data),
			"shadowName":   ShadowNameFor(sha256Hex(data)),
		}, nil
	case "config":
		return map[string]string{"configSHA256": sha256Hex(doc)}, nil
	case "binding":
		b, err := ParseBinding(doc)
		if err != nil {
			return nil, err
		}
		if v.Identity != nil {
			id, err := ParseIdentity(v.Identity)
			if err != nil {
				return nil, err
			}
			if err := b.VerifyIdentity(id); err != nil {
				return nil, err
			}
		}
		if v.Config != nil {
			if err := b.VerifyConfig([]byte(*v.Config)); err != nil {
				return nil, err
			}
		}
		return map[string]string{"canonical": canonical(b), "shadowName": ShadowNameFor(b.AttachmentID)}, nil
	case "registry":
		r, err := ParseRegistry(doc)
		if err != nil {
			return nil, err
		}
		return map[string]string{"canonical": canonical(r)}, nil
	case "selection":
		s, err := ParseSelection(doc)
		if err != nil {
			return nil, err
		}
		return map[string]string{"canonical": canonical(s)}, nil
	case "deviceInfo":
		d, err := ParseDeviceInfo(doc)
		if err != nil {
			return nil, err
		}
		return map[string]string{"canonical": canonical(d)}, nil
	case "labelValue":
		if err := LabelValue(v.Document); err != nil {
			return nil, err
		}
		return map[string]string{"value": v.Document}, nil
	}
	return nil, fmt.Errorf("unknown kind %q", v.Kind)
}

// CheckVector returns one line per mismatch between the vector and this implementation.
func CheckVector(path string, wantValid bool) []string {
	name := filepath.Join(filepath.Base(filepath.Dir(path)), filepath.Base(path))
	raw, err := os.ReadFile(path)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", name, err)}
	}
	if err := checkText(raw); err != nil {
		return []string{fmt.Sprintf("%s: vector file: %v", name, err)}
	}
	var v Vector
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return []string{fmt.Sprintf("%s: vector file: %v", name, err)}
	}
	if wantValid != (v.Expect != nil) || wantValid == (v.Error != "") {
		return []string{name + ": a valid vector needs expect, an invalid one error, never both"}
	}
	got, err := outcome(v)
	var ce *ContractError
	reason := ""
	if errors.As(err, &ce) {
		reason = ce.Reason
	} else if err != nil {
		return []string{fmt.Sprintf("%s: %v", name, err)}
	}
	switch {
	case wantValid && !reflect.DeepEqual(got, v.Expect):
		return []string{fmt.Sprintf("%s: expected %v, got %v %s", name, v.Expect, got, reason)}
	case !wantValid && reason != v.Error:
		return []string{fmt.Sprintf("%s: expected error %s, got %q %v", name, v.Error, reason, got)}
	}
	return nil
}

// CheckDir checks every vector under root/v1 and counts them by validity and category.
func CheckDir(root string) (mismatches []string, counts map[string]int, err error) {
	counts = map[string]int{}
	for _, sub := range []string{"valid", "invalid"} {
		paths, _ := filepath.Glob(filepath.Join(root, "v1", sub, "*.json"))
		sort.Strings(paths)
		for _, p := range paths {
			mismatches = append(mismatches, CheckVector(p, sub == "valid")...)
			counts[sub]++
		}
	}
	if counts["valid"]+counts["invalid"] == 0 {
		return nil, counts, fmt.Errorf("no vectors under %s/v1", root)
	}
	return mismatches, counts, nil
}
