package contract

import (
	"os"
	"strings"
	"testing"
)

func fixtures() string {
	if dir := os.Getenv("CONTRACT_FIXTURES"); dir != "" {
		return dir
	}
	return "../../../fixtures"
}

func TestVectors(t *testing.T) {
	mismatches, counts, err := CheckDir(fixtures())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mismatches {
		t.Error(m)
	}
	if counts["valid"]+counts["invalid"] < 40 {
		t.Errorf("only %v vectors", counts)
	}
	t.Logf("%d valid, %d invalid vectors", counts["valid"], counts["invalid"])
}

func TestOneChangedCanonicalByteFailsTheVectors(t *testing.T) {
	recordEnd = '\r'
	defer func() { recordEnd = '\n' }()
	mismatches, _, err := CheckDir(fixtures())
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, m := range mismatches {
		name, _, _ := strings.Cut(m, ":")
		failed[name] = true
	}
	for _, want := range []string{"valid/identity-basic.json", "valid/binding-basic.json"} {
		if !failed[want] {
			t.Errorf("%s still passes with a changed record terminator", want)
		}
	}
}

func TestGoDefaultsWouldBeLenient(t *testing.T) {
	// The reasons the checker cannot use encoding/json defaults alone.
	for doc, reason := range map[string]string{
		`{"protocolVersion":1,"nodeUID":"a","nodeUID":"b"}`: "DuplicateKey",
		`{"a":"\udc00"}`:  "InvalidEncoding",
		`{"a":"\ud800x"}`: "InvalidEncoding",
	} {
		err := checkText([]byte(doc))
		if ce, ok := err.(*ContractError); !ok || ce.Reason != reason {
			t.Errorf("%s: got %v, want %s", doc, err, reason)
		}
	}
	if err := checkText([]byte(`{"a":"\ud83d\ude00"}`)); err != nil {
		t.Errorf("a surrogate pair is valid: %v", err)
	}
}
