// Package session owns the browser's session with the provider, as Dex's
// server/session does: the cookies (their names, paths and flags), the
// sealer of browser state under the cluster-wide browser key and that key
// itself, the SSO session's lifetimes (idle and absolute), and the lookup
// of the browser's SSO session from its cookie. node builds one Manager
// and hands it to the authorization flow (package oidc), the sign-in
// (package signin) and logout (package logout); none of them builds its
// own.
//
// Invariants:
//   - Cookie names, paths and flags are decided here alone (CookieName,
//     Manager.SetCookie): every cookie is HttpOnly and SameSite=Lax,
//     Secure with a __Host- or __Secure- name on an https issuer.
//   - The browser key is created once, by a leader (EnsureBrowserKey),
//     sealed under the KEK with BrowserKeyAAD before it is proposed; its
//     stored form is read by every node of the previous release too, so
//     it does not change.
//   - The store holds only authn.HashToken of the SSO cookie's secret; a
//     cookie value longer than ours is never looked up.
//   - session imports fsm and the leaf helpers only: never a protocol or
//     sign-in room, never the cluster.
package session
