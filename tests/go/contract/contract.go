package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// recordEnd terminates each canonical identity record; a variable only so a test can prove that
// changing one byte of the canonical form breaks every identity vector.
var recordEnd = byte('\n')

type Identity struct {
	ProtocolVersion int    `json:"protocolVersion"`
	NodeUID         string `json:"nodeUID"`
	PodUID          string `json:"podUID"`
	ClaimUID        string `json:"claimUID"`
	Driver          string `json:"driver"`
	Pool            string `json:"pool"`
	Device          string `json:"device"`
}

type SourceRef struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
}

type Binding struct {
	Version      int       `json:"version"`
	AttachmentID string    `json:"attachmentID"`
	PodUID       string    `json:"podUID"`
	ClaimUID     string    `json:"claimUID"`
	NodeName     string    `json:"nodeName"`
	NodeUID      string    `json:"nodeUID"`
	Source       SourceRef `json:"source"`
	PCIAddress   string    `json:"pciAddress"`
	Interface    string    `json:"interface"`
	ConfigSHA256 string    `json:"configSHA256"`
}

type RegistryEntry struct {
	AttachmentID string `json:"attachmentID"`
	ClaimUID     string `json:"claimUID"`
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	UID          string `json:"uid"`
	Interface    string `json:"interface"`
	ConfigSHA256 string `json:"configSHA256"`
}

type Registry struct {
	Version int             `json:"version"`
	PodUID  string          `json:"podUID"`
	Entries []RegistryEntry `json:"entries"`
}

type DeviceInfo struct {
	Version      int    `json:"version"`
	PCIAddress   string `json:"pciAddress"`
	PFPCIAddress string `json:"pfPciAddress"`
	RDMADevice   string `json:"rdmaDevice"`
}

type Selection struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Interface string `json:"interface"`
}

func strings_(names ...string) []field {
	out := make([]field, len(names))
	for i, n := range names {
		out[i] = field{name: n, kind: kString}
	}
	return out
}

var (
	identityShape = &shape{what: "identity", version: "protocolVersion",
		fields: append([]field{{name: "protocolVersion"}}, strings_("nodeUID", "podUID", "claimUID", "driver", "pool", "device")...)}
	sourceShape  = &shape{what: "binding source", fields: strings_("namespace", "name", "uid", "resourceVersion")}
	bindingShape = &shape{what: "binding", version: "version", fields: concat(
		[]field{{name: "version"}},
		strings_("attachmentID", "podUID", "claimUID", "nodeName", "nodeUID"),
		[]field{{name: "source", kind: kObject, sub: sourceShape}},
		strings_("pciAddress", "interface", "configSHA256"))}
	entryShape    = &shape{what: "registry entry", fields: strings_("attachmentID", "claimUID", "namespace", "name", "uid", "interface", "configSHA256")}
	registryShape = &shape{what: "registry", version: "version", fields: []field{
		{name: "version"}, {name: "podUID", kind: kString}, {name: "entries", kind: kObjectArray, sub: entryShape}}}
	selectionShape  = &shape{what: "selection", fields: strings_("name", "namespace", "interface")}
	deviceInfoShape = &shape{what: "device-info", version: "version",
		fields: append([]field{{name: "version"}}, strings_("pciAddress", "pfPciAddress", "rdmaDevice")...)}
)

func concat(parts ...[]field) []field {
	var out []field
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var (
	uidRE      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	sha256RE   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	labelRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	subRE      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	pciRE      = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$`)
	rvRE       = regexp.MustCompile(`^[!-~]{1,128}$`)
	shadowRE   = regexp.MustCompile(`^dra-sriov-[0-9a-f]{32}$`)
	labelValRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	rdmaRE     = regexp.MustCompile(`^([A-Za-z0-9_][-A-Za-z0-9_.]{0,62})?$`)
)

func match(re *regexp.Regexp, reason, name, value string) error {
	if !re.MatchString(value) {
		return fail(reason, "%s %q", name, value)
	}
	return nil
}

func first(errs ...func() error) error {
	for _, f := range errs {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

func uid(name, v string) func() error {
	return func() error { return match(uidRE, "InvalidUID", name, v) }
}
func digest(name, v string) func() error {
	return func() error { return match(sha256RE, "InvalidSHA256", name, v) }
}
func dnsLabel(name, v string) func() error {
	return func() error { return match(labelRE, "InvalidName", name, v) }
}
func subdomain(name, v string) func() error {
	return func() error {
		if len(v) > 253 {
			return fail("InvalidName", "%s longer than 253", name)
		}
		return match(subRE, "InvalidName", name, v)
	}
}
func shadowName(v string) func() error {
	return func() error { return match(shadowRE, "InvalidShadowName", "name", v) }
}

func ifnameRuneForbidden(r rune) bool {
	switch {
	case r <= 0x20, r >= 0x7f && r <= 0xa0, r == '/', r == ':':
		return true
	case r == 0x1680, r >= 0x2000 && r <= 0x200a, r == 0x2028, r == 0x2029, r == 0x202f, r == 0x205f, r == 0x3000:
		return true
	}
	return false
}

func ifname(v string) func() error {
	return func() error {
		if len(v) < 1 || len(v) > 15 || v == "." || v == ".." || !utf8.ValidString(v) {
			return fail("InvalidInterfaceName", "interface %q", v)
		}
		for _, r := range v {
			if ifnameRuneForbidden(r) {
				return fail("InvalidInterfaceName", "interface %q", v)
			}
		}
		return nil
	}
}

func identityText(name, v string, limit int) func() error {
	return func() error {
		if len(v) < 1 || len(v) > limit || !utf8.ValidString(v) {
			return fail("InvalidIdentityField", "%s %q", name, v)
		}
		return nil
	}
}

// CanonicalBytes is the README identity form: name:len:value records in fixed order.
func (id Identity) CanonicalBytes() []byte {
	var out []byte
	for _, kv := range [][2]string{
		{"protocolVersion", strconv.Itoa(id.ProtocolVersion)},
		{"nodeUID", id.NodeUID}, {"podUID", id.PodUID}, {"claimUID", id.ClaimUID},
		{"driver", id.Driver}, {"pool", id.Pool}, {"device", id.Device},
	} {
		out = append(out, kv[0]...)
		out = append(out, ':')
		out = strconv.AppendInt(out, int64(len(kv[1])), 10)
		out = append(out, ':')
		out = append(out, kv[1]...)
		out = append(out, recordEnd)
	}
	return out
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (id Identity) AttachmentID() string { return sha256Hex(id.CanonicalBytes()) }

func ShadowNameFor(attachmentID string) string { return "dra-sriov-" + attachmentID[:32] }

func ParseIdentity(doc []byte) (Identity, error) {
	var id Identity
	if err := decode(doc, identityShape, &id); err != nil {
		return id, err
	}
	return id, first(uid("nodeUID", id.NodeUID), uid("podUID", id.PodUID), uid("claimUID", id.ClaimUID),
		identityText("driver", id.Driver, 63), identityText("pool", id.Pool, 253), identityText("device", id.Device, 63))
}

func ParseBinding(doc []byte) (Binding, error) {
	var b Binding
	if err := decode(doc, bindingShape, &b); err != nil {
		return b, err
	}
	s := b.Source
	return b, first(
		dnsLabel("source.namespace", s.Namespace), subdomain("source.name", s.Name), uid("source.uid", s.UID),
		func() error {
			return match(rvRE, "InvalidResourceVersion", "source.resourceVersion", s.ResourceVersion)
		},
		digest("attachmentID", b.AttachmentID), uid("podUID", b.PodUID), uid("claimUID", b.ClaimUID),
		subdomain("nodeName", b.NodeName), uid("nodeUID", b.NodeUID),
		func() error { return match(pciRE, "InvalidPCIAddress", "pciAddress", b.PCIAddress) },
		ifname(b.Interface), digest("configSHA256", b.ConfigSHA256))
}

func checkEntry(e RegistryEntry) error {
	return first(digest("attachmentID", e.AttachmentID), uid("claimUID", e.ClaimUID), dnsLabel("namespace", e.Namespace),
		shadowName(e.Name), uid("uid", e.UID), ifname(e.Interface), digest("configSHA256", e.ConfigSHA256),
		func() error {
			if e.Name != ShadowNameFor(e.AttachmentID) {
				return fail("ShadowNameMismatch", "%s is not the shadow of %s", e.Name, e.AttachmentID)
			}
			return nil
		})
}

func ParseRegistry(doc []byte) (Registry, error) {
	r := Registry{Entries: []RegistryEntry{}}
	if err := decode(doc, registryShape, &r); err != nil {
		return r, err
	}
	for _, e := range r.Entries {
		if err := checkEntry(e); err != nil {
			return r, err
		}
	}
	if err := uid("podUID", r.PodUID)(); err != nil {
		return r, err
	}
	for _, dup := range []struct {
		reason string
		key    func(RegistryEntry) string
	}{
		{"DuplicateAttachmentID", func(e RegistryEntry) string { return e.AttachmentID }},
		{"DuplicateSelection", func(e RegistryEntry) string { return e.Namespace + "/" + e.Name }},
		{"DuplicateInterface", func(e RegistryEntry) string { return e.Interface }},
	} {
		seen := map[string]bool{}
		for _, e := range r.Entries {
			if seen[dup.key(e)] {
				return r, fail(dup.reason, "%q repeats", dup.key(e))
			}
			seen[dup.key(e)] = true
		}
	}
	for _, e := range r.Entries {
		if e.Namespace != r.Entries[0].Namespace {
			return r, fail("MixedNamespaces", "entries in %s and %s", e.Namespace, r.Entries[0].Namespace)
		}
	}
	return r, nil
}

func ParseSelection(doc []byte) (Selection, error) {
	var s Selection
	if err := decode(doc, selectionShape, &s); err != nil {
		return s, err
	}
	return s, first(shadowName(s.Name), dnsLabel("namespace", s.Namespace), ifname(s.Interface))
}

func ParseDeviceInfo(doc []byte) (DeviceInfo, error) {
	var d DeviceInfo
	if err := decode(doc, deviceInfoShape, &d); err != nil {
		return d, err
	}
	return d, first(
		func() error { return match(pciRE, "InvalidPCIAddress", "pciAddress", d.PCIAddress) },
		func() error { return match(pciRE, "InvalidPCIAddress", "pfPciAddress", d.PFPCIAddress) },
		func() error { return match(rdmaRE, "InvalidName", "rdmaDevice", d.RDMADevice) },
	)
}

func LabelValue(v string) error {
	if len(v) > 63 || !labelValRE.MatchString(v) {
		return fail("InvalidLabelValue", "%q", v)
	}
	return nil
}

// VerifyIdentity is the full-identity lookup check that catches truncated-name collisions.
func (b Binding) VerifyIdentity(id Identity) error {
	if b.AttachmentID != id.AttachmentID() || b.PodUID != id.PodUID || b.ClaimUID != id.ClaimUID || b.NodeUID != id.NodeUID {
		return fail("IdentityMismatch", "binding %s does not describe %s/%s/%s", b.AttachmentID, id.Driver, id.Pool, id.Device)
	}
	return nil
}

func (b Binding) VerifyConfig(config []byte) error {
	if sha256Hex(config) != b.ConfigSHA256 {
		return fail("ConfigHashMismatch", "config does not hash to %s", b.ConfigSHA256)
	}
	return nil
}
