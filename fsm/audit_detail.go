package fsm

import "github.com/oidcd/oidcd/fsm/trail"

// DetailCredential is the detail key of an admin event that says who
// acted: a compact JSON object, {"kind":"person","sub":...},
// {"kind":"api_key","id":...} or {"kind":"token"}, never the secret.
const DetailCredential = trail.DetailCredential

// EventDetail is an event's detail: a map of strings, stored and hashed
// as such, with DetailCredential's value written in JSON as the object it
// holds (trail.EventDetail).
type EventDetail = trail.EventDetail
