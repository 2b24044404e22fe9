// Package htmlform finds a page's post form the way a browser submits it:
// the form that holds the submit button name=value (every sign-in step is
// laid out so), its action, and the values of its inputs (the CSRF token and
// step handle among them). The test browser of testcluster, the chaos
// workload and the load tool share it.
package htmlform
