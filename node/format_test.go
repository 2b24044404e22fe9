package node_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// TestNodeStopsOnANewerStateFormat: a follower handed a log entry that
// raises the state format beyond this build (as a leader of a newer
// release would, once it believed every member could apply it) stops:
// Done delivers node.ErrNewerFormat naming the release it needs, its
// state stays at the entry before, and the other nodes serve on.
func TestNodeStopsOnANewerStateFormat(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Size: 3})
	leader := c.WaitNewLeader()
	f := c.Followers()[0]
	sm := c.Node(f).StateMachine()
	before := sm.Applied()
	formatBefore := sm.State().StateFormat()
	entry := fsm.MustCommand(fsm.TypeSetStateFormat, fsm.SetStateFormat{Format: fsm.CurrentFormat + 1, Version: "9.1.0"})
	sm.ApplyBatch([]*raft.Log{{Index: before + 1, Type: raft.LogCommand, Data: entry.Encode()}})
	select {
	case err := <-c.Node(f).Done():
		if !errors.Is(err, node.ErrNewerFormat) || !strings.Contains(err.Error(), "9.1.0") {
			t.Fatalf("the follower stopped with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the follower did not stop on an entry of a newer format")
	}
	if got := sm.Applied(); got < before {
		t.Fatalf("applied index went back to %d", got)
	}
	if st := sm.State().StateFormat(); st != formatBefore || st > fsm.CurrentFormat {
		t.Fatalf("the refused entry raised the format to %d", st)
	}
	// The others go on: a write commits with the two voters left.
	req, _ := http.NewRequest("POST", c.URL(leader)+"/admin/v1/organizations", strings.NewReader(`{"slug":"after","name":"After"}`))
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("a write after the follower stopped: %d", resp.StatusCode)
	}
}
