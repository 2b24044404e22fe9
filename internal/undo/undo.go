// Package undo is the clean-up stack of constructors that build several
// resources one after the other (node.New, cluster.New): each step pushes
// how to undo itself, and a failure in a later step undoes the earlier
// ones in reverse order, so no constructor repeats its clean-up by hand
// at every exit.
package undo

// Stack holds clean-ups, the last pushed run first.
type Stack struct{ fns []func() }

// Push adds f, to run before everything pushed earlier.
func (s *Stack) Push(f func()) { s.fns = append(s.fns, f) }

// Reset forgets every clean-up pushed so far and pushes f instead: for the
// step after which one owner (a Shutdown) undoes everything.
func (s *Stack) Reset(f func()) { s.fns = []func(){f} }

// Run runs the clean-ups, last pushed first, and empties the stack.
func (s *Stack) Run() {
	for i := len(s.fns) - 1; i >= 0; i-- {
		s.fns[i]()
	}
	s.fns = nil
}

// OnError runs the stack when *err is not nil: defer s.OnError(&err) in a
// constructor with a named error result.
func (s *Stack) OnError(err *error) {
	if *err != nil {
		s.Run()
	}
}
