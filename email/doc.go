// Package email is the provider's mail to people: what each message says
// (Compose, from the templates under templates/), its body sealed for the
// replicated outbox (Outgoing, Open), and the leader's delivery of the
// outbox through the site's relay or an outbox file (Sender).
//
// A message is committed to the state (fsm.OutgoingEmail, carried by the
// command that makes the link it holds) before it is sent. The body holds
// a link's token, so it is sealed under the operator's key-encryption key
// (internal/kek) before it is proposed: the raft log, the state file and
// snapshots hold ciphertext when --kek-file is given, and the body is
// dropped from the state once the message is sent or has failed for good.
//
// # Languages
//
// A message is written in one of the languages of internal/i18n (en, de,
// fr, es, ja): Compose's locale, English for any other, and the language
// used is recorded in Message.Locale and so in the outbox. The templates
// hold no words of their own: every text, subjects and a link's lifetime
// ("7 days", a plural) included, is a key of the catalog
// locales/<tag>/email.json, read by i18n.Load, which refuses a language
// that lacks a key or a placeholder of English's. Each template is parsed
// once per language, with t (a text of the catalog), duration and lang
// (for <html lang>) bound to it. A template's subject is its text
// template's "<name>.subject", made one line. A text's arguments keep
// English's order (Load checks it): a language that needs another order
// rephrases. To add a text, add its key to every language's file and
// name it in the templates; the tests refuse a word outside the catalog,
// a key no template names and a key a template names that the catalog
// lacks.
package email
