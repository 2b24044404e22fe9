package fsm

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// baseFieldsFile lists every field of FormatBase (oidcd 0.3.0), one
// "GoType.GoField" a line. It was written once from that release's types
// (OIDCD_WRITE_BASE_FIELDS=1 go test -run TestEveryCommandAndFieldHasAFormat)
// and never changes: a field added later is declared in fieldFormats.
const baseFieldsFile = "testdata/format-base-fields.txt"

// reachableFields lists "GoType.GoField" for every exported field of the
// payload types of every command and every record type, and of the
// structs below them.
func reachableFields() []string {
	seen := map[reflect.Type]bool{}
	var out []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			if t.Kind() == reflect.Map {
				walk(t.Key())
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] || t.PkgPath() != reflect.TypeFor[Command]().PkgPath() && t.Name() != "" {
			return // time.Time and other packages' types are values, not our records
		}
		seen[t] = true
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			if sf.Anonymous {
				walk(sf.Type) // an embedded struct's fields are its own type's
				continue
			}
			out = append(out, t.Name()+"."+sf.Name)
			walk(sf.Type)
		}
	}
	for _, d := range commandFormats {
		walk(d.payload)
	}
	for _, rb := range recordBuckets() {
		walk(reflect.TypeOf(rb.newRec()))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestEveryCommandAndFieldHasAFormat(t *testing.T) {
	for typ := range handlers {
		d, ok := commandFormats[typ]
		if !ok {
			t.Errorf("command %s has no format: declare it in commandFormats (format.go) with CurrentFormat, raised if this release has not yet added one", typ)
			continue
		}
		if d.since < FormatBase || d.since > CurrentFormat {
			t.Errorf("command %s: format %d is outside 1..%d", typ, d.since, CurrentFormat)
		}
		if d.since > FormatBase && typ <= TypeSetBranding {
			t.Errorf("command %s was in oidcd 0.3.0, yet declares format %d", typ, d.since)
		}
		if d.since == FormatBase && typ > TypeSetBranding {
			t.Errorf("command %s came after oidcd 0.3.0, yet declares FormatBase", typ)
		}
	}
	for typ := range commandFormats {
		if handlers[typ] == nil {
			t.Errorf("commandFormats declares %s, which has no handler", typ)
		}
	}
	for f := FormatBase; f <= CurrentFormat; f++ {
		if formatReleases[f] == "" {
			t.Errorf("format %d names no release in formatReleases", f)
		}
	}
	fields := reachableFields()
	if os.Getenv("OIDCD_WRITE_BASE_FIELDS") != "" {
		if err := os.WriteFile(baseFieldsFile, []byte(strings.Join(fields, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := map[string]bool{}
	fh, err := os.Open(baseFieldsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	for sc := bufio.NewScanner(fh); sc.Scan(); {
		base[sc.Text()] = true
	}
	if len(base) < 100 {
		t.Fatalf("%s holds %d fields", baseFieldsFile, len(base))
	}
	for _, f := range fields {
		since, declared := fieldFormats[f]
		switch {
		case base[f] && declared:
			t.Errorf("field %s was in oidcd 0.3.0 (%s), yet fieldFormats declares it (format %d)", f, filepath.Base(baseFieldsFile), since)
		case !base[f] && !declared:
			t.Errorf("field %s has no format: declare it in fieldFormats (format.go) with the format of the release that adds it", f)
		case declared && (since <= FormatBase || since > CurrentFormat):
			t.Errorf("field %s: format %d is outside 2..%d", f, since, CurrentFormat)
		}
	}
	for f := range fieldFormats {
		if !slices.Contains(fields, f) {
			t.Errorf("fieldFormats declares %s, which no payload or record has", f)
		}
	}
}

// The declaration test would pass on a declaration the walker never
// reads: this one proves that a declared field, set anywhere below a
// payload (a nested struct, a slice, a map, a pointer), raises Need, and
// a zero one does not.
func TestValueNeedFindsDeclaredFields(t *testing.T) {
	type Leaf struct {
		Old string
		New []string
	}
	type Mid struct {
		Leaves []Leaf
		ByKey  map[string]*Leaf
	}
	type Payload struct {
		Name string
		Mid  Mid
		Ptr  *Leaf
		Flag bool
	}
	decl := map[string]Format{"Leaf.New": 3, "Payload.Flag": 2}
	cases := []struct {
		name string
		v    any
		want Format
		what string
	}{
		{"nothing set", Payload{Name: "x", Mid: Mid{Leaves: []Leaf{{Old: "a"}}}}, 0, ""},
		{"a top field", Payload{Flag: true}, 2, "Payload.Flag"},
		{"in a slice", Payload{Mid: Mid{Leaves: []Leaf{{}, {New: []string{"n"}}}}}, 3, "Leaf.New"},
		{"in a map of pointers", Payload{Mid: Mid{ByKey: map[string]*Leaf{"k": {New: []string{"n"}}}}}, 3, "Leaf.New"},
		{"behind a pointer", &Payload{Ptr: &Leaf{New: []string{"n"}}, Flag: true}, 3, "Leaf.New"},
		{"an empty slice is zero", Payload{Ptr: &Leaf{New: []string{}}}, 3, "Leaf.New"},
		{"a nil pointer", Payload{Ptr: nil}, 0, ""},
	}
	for _, c := range cases {
		got, what := valueNeed(reflect.ValueOf(c.v), decl)
		// An empty, non-nil slice is not the zero value: it is sent.
		if got != c.want || what != c.what {
			t.Errorf("%s: need %d (%s), want %d (%s)", c.name, got, what, c.want, c.what)
		}
	}
	if p := planFor(reflect.TypeFor[Payload](), map[string]Format{}); p != nil {
		t.Errorf("a type with nothing declared has a plan: %+v", p)
	}
}

func TestCheckFormatRefusesWhatTheClusterCannotApply(t *testing.T) {
	f := openTemp(t)
	st := f.State()
	if st.StateFormat() != FormatBase {
		t.Fatalf("a new state runs format %d, want %d", st.StateFormat(), FormatBase)
	}
	base := MustCommand(TypeCreateOrg, CreateOrg{ID: "o", Slug: "o", Name: "O"})
	if base.Need != FormatBase || st.CheckFormat(base) != nil {
		t.Fatalf("a base command: need %d, check %v", base.Need, st.CheckFormat(base))
	}
	raise := MustCommand(TypeSetStateFormat, SetStateFormat{Format: FormatGate, Version: "0.4.0"})
	var fe *FormatError
	if err := st.CheckFormat(raise); !errors.As(err, &fe) || fe.Need != FormatGate || fe.Have != FormatBase || fe.Feature != "set_state_format" {
		t.Fatalf("set_state_format at format 1: %v", err)
	}
	if !errors.Is(fe, ErrFormat) || !strings.Contains(fe.Error(), "0.4.0") {
		t.Errorf("the error: %v", fe)
	}
	// A decoded command (Need 0) is judged by its type.
	dec, _ := Decode(raise.Encode())
	if st.CheckFormat(dec) == nil {
		t.Error("a decoded set_state_format passed at format 1")
	}
	// Applied (as the leader does once every member announces it), the
	// format rises, is read without a transaction, and stays up.
	applyOK(t, f, raise)
	if st.StateFormat() != FormatGate || st.StateFormatVersion() != "0.4.0" || st.CheckFormat(raise) != nil {
		t.Fatalf("after the raise: format %d %q, check %v", st.StateFormat(), st.StateFormatVersion(), st.CheckFormat(raise))
	}
	applyOK(t, f, MustCommand(TypeSetStateFormat, SetStateFormat{Format: FormatBase, Version: "0.3.0"}))
	if st.StateFormat() != FormatGate {
		t.Fatalf("a lower format brought it down to %d", st.StateFormat())
	}
	// It survives a restart.
	path := f.path
	f.Close()
	g, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.State().StateFormat() != FormatGate {
		t.Fatalf("reopened: format %d", g.State().StateFormat())
	}
}

// A log entry raising the format beyond this build stops the replica
// before anything of its batch is applied, tells OnHalt once, refuses
// later batches and snapshots, and a start on the same data goes on from
// the entry before it (for the build that can apply it).
func TestNewerFormatInTheLogStopsBeforeChangingAnything(t *testing.T) {
	f := openTemp(t)
	var told []error
	f.OnHalt = func(err error) { told = append(told, err) }
	applyOK(t, f, MustCommand(TypeCreateOrg, CreateOrg{ID: "o1", Slug: "o1", Name: "O1", CreatedAt: time.Unix(1, 0)}))
	before := f.Applied()
	future := MustCommand(TypeSetStateFormat, SetStateFormat{Format: CurrentFormat + 1, Version: "9.9.0"})
	batch := []*raft.Log{
		{Index: before + 1, Type: raft.LogCommand, Data: MustCommand(TypeCreateOrg, CreateOrg{ID: "o2", Slug: "o2", Name: "O2"}).Encode()},
		{Index: before + 2, Type: raft.LogCommand, Data: future.Encode()},
	}
	out := f.ApplyBatch(batch)
	var nfe *NewerFormatError
	if r, _ := out[1].(Result); !errors.As(r.Err, &nfe) || nfe.Format != CurrentFormat+1 || !strings.Contains(nfe.Error(), "9.9.0") || !strings.Contains(nfe.Error(), "log entry") {
		t.Fatalf("the entry of a newer format: %+v", out[1])
	}
	if len(told) != 1 || f.Halted() == nil {
		t.Fatalf("OnHalt told %d times; Halted %v", len(told), f.Halted())
	}
	if f.Applied() != before {
		t.Fatalf("applied index moved to %d (was %d)", f.Applied(), before)
	}
	if _, err := f.State().Org("o2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the entry before it in the batch was applied: %v", err)
	}
	out = f.ApplyBatch([]*raft.Log{{Index: before + 3, Type: raft.LogCommand, Data: MustCommand(TypeNoop, nil).Encode()}})
	if r, _ := out[0].(Result); r.Err == nil {
		t.Fatal("a halted replica applied a later entry")
	}
	if _, err := f.Snapshot(); err == nil {
		t.Fatal("a halted replica took a snapshot")
	}
	if len(told) != 1 {
		t.Fatalf("OnHalt told %d times", len(told))
	}
}

// A data dir (or a backup, or a snapshot) of a newer format is refused
// before anything changes: the downgrade of a node whose cluster raised
// the format.
func TestNewerFormatOnDiskIsRefused(t *testing.T) {
	f := openTemp(t)
	path := f.path
	f.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		tx.Bucket(bucketMeta).Put(keyStateFormat, []byte("99"))
		return tx.Bucket(bucketMeta).Put(keyStateFormatVersion, []byte("7.0.0"))
	})
	db.Close()
	before, _ := os.ReadFile(path)
	_, err = Open(path)
	var nfe *NewerFormatError
	if !errors.As(err, &nfe) || nfe.Format != 99 || !strings.Contains(err.Error(), "run oidcd 7.0.0 or newer") {
		t.Fatalf("open of a format-99 state: %v", err)
	}
	if after, _ := os.ReadFile(path); !slices.Equal(before, after) {
		t.Error("the refused open changed the file")
	}
	if err := CheckFile(path); !errors.As(err, &nfe) {
		t.Errorf("CheckFile of a format-99 backup: %v", err)
	}
	// As a snapshot from the leader: refused, the replica halts.
	g := openTemp(t)
	var told error
	g.OnHalt = func(err error) { told = err }
	fh, _ := os.Open(path)
	if err := g.Restore(fh); !errors.As(err, &nfe) || told == nil || g.Halted() == nil {
		t.Fatalf("restore of a format-99 snapshot: %v (told %v)", err, told)
	}
}

func openTemp(t *testing.T) *FSM {
	t.Helper()
	f, err := Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func applyOK(t *testing.T, f *FSM, cmd Command) Result {
	t.Helper()
	res := f.Apply(&raft.Log{Index: f.Applied() + 1, Type: raft.LogCommand, Data: cmd.Encode()}).(Result)
	if res.Err != nil {
		t.Fatalf("%s: %v", cmd.Type, res.Err)
	}
	return res
}
