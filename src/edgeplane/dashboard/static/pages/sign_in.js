// The sign-in page: the admin user's email and password (credentials.json), or an API token.
import { h, errorBox, field } from "../dom.js";
import { signIn } from "../session.js";

/** The sign-in page; calls onSignedIn(session) once the API opened a session. */
export function signInPage(onSignedIn) {
  const errors = h("div", { className: "errors" });
  const email = field({ label: "Email", name: "email", type: "email", autocomplete: "username", required: true });
  const password = field({
    label: "Password",
    name: "password",
    type: "password",
    autocomplete: "current-password",
    required: true,
    hint: "The admin user's password is the \"password\" key of credentials.json in the data directory.",
  });
  const token = field({
    label: "API token",
    name: "token",
    type: "password",
    autocomplete: "off",
    required: true,
    hint: "What the token may do is what the dashboard may do.",
  });

  async function submit(event, credentials) {
    event.preventDefault();
    errors.replaceChildren();
    const button = event.target.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      onSignedIn(await signIn(credentials));
    } catch (error) {
      errors.replaceChildren(errorBox(error));
      button.disabled = false;
    }
  }

  const passwordForm = h(
    "form",
    {
      "aria-labelledby": "password-heading",
      onsubmit: (event) => submit(event, { email: email.input.value, password: password.input.value }),
    },
    h("h2", { id: "password-heading" }, "With your email and password"),
    email,
    password,
    h("button", { type: "submit", className: "primary" }, "Sign in"),
  );
  const tokenForm = h(
    "form",
    { "aria-labelledby": "token-heading", onsubmit: (event) => submit(event, { token: token.input.value }) },
    h("h2", { id: "token-heading" }, "Or with an API token"),
    token,
    h("button", { type: "submit" }, "Sign in with token"),
  );
  return h(
    "main",
    { id: "main", className: "sign-in", tabindex: "-1" },
    h("h1", {}, "Sign in to edgeplane"),
    errors,
    passwordForm,
    tokenForm,
  );
}
