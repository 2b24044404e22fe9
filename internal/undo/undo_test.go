package undo

import (
	"errors"
	"slices"
	"testing"
)

func TestStack(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want []string
	}{
		{"success runs nothing", nil, nil},
		{"failure runs in reverse", errors.New("x"), []string{"c", "b", "a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			func() (err error) {
				var s Stack
				defer s.OnError(&err)
				for _, n := range []string{"a", "b", "c"} {
					s.Push(func() { got = append(got, n) })
				}
				return c.err
			}()
			if !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	var got []string
	var s Stack
	s.Push(func() { got = append(got, "a") })
	s.Reset(func() { got = append(got, "owner") })
	s.Run()
	s.Run()
	if !slices.Equal(got, []string{"owner"}) {
		t.Fatalf("Reset then Run twice: got %v, want [owner]", got)
	}
}
