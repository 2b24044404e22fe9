// Package sms sends text messages: one JSON object
// per message, appended as a line to an outbox file or POSTed to a
// webhook. Another gateway is one more Sender. The webhook is called in
// the background and never follows a redirect (see Webhook, Background).
package sms
