// oidcd passkey ceremony: reads the options the server put in
// #passkey-options, runs navigator.credentials.create or .get, and posts
// the result back in the hidden "credential" input. No inline script: the
// page's CSP allows only this file.
(function () {
  "use strict";
  var form = document.getElementById("passkey-form");
  var out = document.getElementById("passkey-credential");
  var status = document.getElementById("passkey-status");
  // The page's texts, in its language, come in data-* attributes of the
  // status line; the English ones are the fallback.
  function text(name, fallback) {
    var v = status && status.getAttribute("data-" + name);
    return v || fallback;
  }
  if (!form || !out || !window.PublicKeyCredential) {
    if (status) status.textContent = text("unsupported", "This browser cannot use passkeys. Use another method.");
    return;
  }
  var options = JSON.parse(document.getElementById("passkey-options").textContent);
  var create = form.getAttribute("data-ceremony") === "create";

  function toBuf(s) {
    s = s.replace(/-/g, "+").replace(/_/g, "/");
    while (s.length % 4) s += "=";
    var bin = atob(s), b = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
    return b.buffer;
  }
  function toB64(buf) {
    var b = new Uint8Array(buf), s = "";
    for (var i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function publicKey() {
    var pk = options.publicKey;
    pk.challenge = toBuf(pk.challenge);
    if (pk.user) pk.user.id = toBuf(pk.user.id);
    (pk.excludeCredentials || []).concat(pk.allowCredentials || []).forEach(function (c) { c.id = toBuf(c.id); });
    return pk;
  }
  function encode(cred) {
    var r = cred.response, resp = { clientDataJSON: toB64(r.clientDataJSON) };
    if (create) {
      resp.attestationObject = toB64(r.attestationObject);
      if (r.getTransports) resp.transports = r.getTransports();
    } else {
      resp.authenticatorData = toB64(r.authenticatorData);
      resp.signature = toB64(r.signature);
      if (r.userHandle) resp.userHandle = toB64(r.userHandle);
    }
    return JSON.stringify({
      id: cred.id, rawId: toB64(cred.rawId), type: cred.type, response: resp,
      clientExtensionResults: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {},
      authenticatorAttachment: cred.authenticatorAttachment || undefined
    });
  }
  var running = false;
  function run(ev) {
    if (ev) ev.preventDefault();
    if (running) return;
    running = true;
    var p = create ? navigator.credentials.create({ publicKey: publicKey() })
                   : navigator.credentials.get({ publicKey: publicKey() });
    p.then(function (cred) {
      out.value = encode(cred);
      form.submit();
    }).catch(function (err) {
      running = false;
      options = JSON.parse(document.getElementById("passkey-options").textContent);
      // data-failed holds %s where the error's name goes.
      status.textContent = text("failed", "The passkey prompt was closed or failed (%s). Press the button to try again.").replace("%s", function () { return String(err.name); });
    });
  }
  form.addEventListener("submit", function (ev) { if (!out.value) run(ev); });
  if (!create) run();
})();
