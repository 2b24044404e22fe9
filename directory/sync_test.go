package directory

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/internal/kek"
	"github.com/oidcd/oidcd/internal/testkit/fsmtest"
	"github.com/oidcd/oidcd/internal/testkit/ldaptest"
)

// TestSyncEndsWhoLeftAndKeepsWhoIsThere: one sync of a directory where
// ann is still in her group and bob (known here, with a membership the
// directory granted) is no longer there: bob's membership is taken back,
// ann is left alone, and the outcome is recorded in last_sync and the
// metrics.
func TestSyncEndsWhoLeftAndKeepsWhoIsThere(t *testing.T) {
	s := ldaptest.Start(t, ldaptest.Person("ann", "ann@example.com", "ann-password")+ldaptest.Group("staff", "ann"))
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return at }
	a := fsmtest.New(t)
	apply := func(typ fsm.Type, v any) fsm.Result {
		t.Helper()
		r, err := a.Apply(context.Background(), fsm.MustCommand(typ, v))
		if err == nil {
			err = r.Err
		}
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		return r
	}
	apply(fsm.TypeCreateOrg, fsm.CreateOrg{ID: "org-staff", Slug: "staff", Name: "Staff", CreatedAt: at})
	cc := config(s)
	pw, err := (*kek.KEK)(nil).Seal([]byte(cc.BindPassword), fsm.DirectoryAAD("corp"))
	if err != nil {
		t.Fatal(err)
	}
	d := fsm.Directory{ID: "corp", Name: "Corp", URL: cc.URL, CAPEM: cc.CAPEM, BindDN: cc.BindDN, BindPassword: pw,
		UserBase: cc.UserBase, UserFilter: cc.UserFilter, IDAttribute: cc.IDAttribute, EmailAttribute: cc.EmailAttribute,
		PhoneAttribute: cc.PhoneAttribute, GroupBase: cc.GroupBase, GroupFilter: cc.GroupFilter,
		Organizations: []fsm.DirectoryOrg{{GroupDN: "cn=staff,ou=groups," + ldaptest.Base, OrgID: "org-staff"}},
		SyncInterval:  time.Hour, CreatedAt: at, UpdatedAt: at}
	apply(fsm.TypePutDirectory, fsm.PutDirectory{Directory: d, Create: true})

	c, err := New(cc)
	if err != nil {
		t.Fatal(err)
	}
	var ann Person
	if err := c.People(context.Background(), nil, func(p Person) error { ann = p; return nil }); err != nil || ann.ID == "" {
		t.Fatalf("reading ann: %v (%+v)", err, ann)
	}
	c.Close()
	apply(fsm.TypeDirectorySignIn, fsm.DirectorySignIn{DirectoryID: "corp", UserID: "u-ann", Person: Record(d, ann, ann.Email), At: at})
	apply(fsm.TypeDirectorySignIn, fsm.DirectorySignIn{DirectoryID: "corp", UserID: "u-bob", At: at, Person: fsm.DirectoryPerson{
		UID: "bob-uid", Email: "bob@example.com", OrgIDs: []string{"org-staff"}, MembershipIDs: []string{"m-bob"}}})

	reg := prometheus.NewRegistry()
	syncer, err := NewSyncer(SyncConfig{State: a.State(), Applier: a, Now: now, Node: "n1", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := a.State().Directories()
	if err != nil || len(dirs) != 1 {
		t.Fatalf("directories: %v %v", dirs, err)
	}
	syncer.sync(context.Background(), dirs[0])

	dirs, _ = a.State().Directories()
	got := dirs[0].LastSync
	want := fsm.DirectorySync{At: at, OK: true, People: 2, Changed: 0, Ended: 1, Node: "n1"}
	if got == nil || *got != want {
		t.Errorf("last_sync %+v, want %+v", got, want)
	}
	for user, n := range map[string]int{"u-ann": 1, "u-bob": 0} {
		ms, err := a.State().MembershipsOfUser(user)
		if err != nil || len(ms) != n {
			t.Errorf("%s: %d memberships (%v), want %d", user, len(ms), err, n)
		}
	}
	var m dto.Metric
	if err := syncer.metrics.syncs.WithLabelValues("corp", "ok").Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		v := m.GetCounter().GetValue()
		t.Errorf("oidcd_directory_syncs_total{ok} = %v, want 1", v)
	}

	// Nothing differs any more: the next sync changes nobody.
	at = at.Add(2 * time.Hour)
	dirs, _ = a.State().Directories()
	syncer.sync(context.Background(), dirs[0])
	dirs, _ = a.State().Directories()
	if got := dirs[0].LastSync; got == nil || !got.OK || got.Changed != 0 || got.Ended != 0 {
		t.Errorf("second sync: %+v, want nothing changed", got)
	}
}
