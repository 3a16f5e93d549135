// Drives the operator dashboard of a running fleet in headless Chromium, as
// an operator would: sign in, start the SOA and see it greet live, chat and
// see the reply appear without a reload, answer its escalation and see it
// resume, replay the greeting turn against another preset and see that
// nothing was sent, switch its mode and see the audit row, look at the
// spend page, and
// check that another tenant's operator sees none of it. Saves a screenshot
// of each page to OUT_DIR. Started by tests/tests/dashboard.rs, which owns
// the fleet; exits non-zero naming the step that failed.
//
// Env: DASH_URL, TOKEN_A, TOKEN_B, SOA_A, PRESET_A (a preset of A's to
// replay against), OUT_DIR, CHROMIUM.

import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const BASE = env("DASH_URL");
const SOA = env("SOA_A");
const OUT = env("OUT_DIR");
mkdirSync(OUT, { recursive: true });

const T = 60_000;
let step = "launch";
let checks = 0;
function check(cond, what) {
  if (!cond) throw new Error(what);
  checks += 1;
}
function log(msg) {
  console.log(`browser: ${msg}`);
}

const browser = await chromium.launch({
  executablePath: env("CHROMIUM"),
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const ctxA = await browser.newContext({ viewport: { width: 1366, height: 900 } });
const page = await ctxA.newPage();
page.on("dialog", (d) => d.accept());
const consoleErrors = [];
page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });

async function shot(name, p = page) {
  await p.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });
}

async function signIn(p, token) {
  await p.goto(`${BASE}/login`);
  await p.getByLabel("Operator token").fill(token);
  await p.getByRole("button", { name: "Sign in" }).click();
  await p.waitForURL(`${BASE}/agents`, { timeout: T });
}

async function liveReady() {
  await page.waitForFunction(
    () => (document.getElementById("live-state")?.textContent || "").startsWith("Live"),
    null, { timeout: T });
}

try {
  step = "sign in";
  // A wrong token stays on the sign-in page with the reason.
  await page.goto(`${BASE}/login`);
  await page.getByLabel("Operator token").fill("gen_not-a-real-token");
  await page.getByRole("button", { name: "Sign in" }).click();
  check((await page.locator("#login-error").textContent()).length > 0, "a bad token shows an error");
  await shot("01-login-refused");
  await signIn(page, env("TOKEN_A"));
  consoleErrors.length = 0; // the refused sign-in above answered 401 on purpose
  const cookies = await ctxA.cookies();
  const session = cookies.find((c) => c.name === "genesis_session");
  check(session && session.httpOnly && session.sameSite === "Strict", "the session cookie is HttpOnly and SameSite=Strict");
  check(await page.evaluate(() => !document.cookie.includes("genesis_session")), "scripts cannot read the session cookie");
  check((await page.locator("#agents").textContent()).includes(SOA.slice(0, 8)), "/agents lists the SOA");
  await shot("02-agents");
  log("signed in; /agents lists the SOA");

  step = "start and greet";
  await page.goto(`${BASE}/agents/${SOA}`);
  check((await page.locator("#agent-status").textContent()).includes("paused"), "the SOA starts paused");
  await liveReady();
  await page.evaluate(() => { window.__sameDocument = true; });
  await page.locator("#lifecycle-form button[value=start]").click();
  await page.locator("#live-turns li", { hasText: "Initialized" }).first().waitFor({ timeout: T });
  await page.locator("#transcript li.agent_to_operator").first().waitFor({ timeout: T });
  check(await page.evaluate(() => window.__sameDocument === true), "the greeting arrived without a reload");
  await shot("03-agent-greeted");
  log("started; the greeting and the Initialized turn arrived live");

  step = "chat";
  await page.getByLabel("Message to the agent").fill("How is the workload today?");
  await page.getByRole("button", { name: "Send" }).click();
  await page.locator("#transcript li.operator_to_agent", { hasText: "How is the workload today?" }).waitFor({ timeout: T });
  await page.locator("#transcript li.agent_to_operator", { hasText: "How is the workload today?" }).waitFor({ timeout: T });
  await page.locator("#live-turns li", { hasText: "MessageAcknowledged" }).first().waitFor({ timeout: T });
  check(await page.evaluate(() => window.__sameDocument === true), "the reply arrived without a reload");
  await shot("04-agent-replied");
  log("the reply appeared without a reload");

  step = "escalate";
  await page.getByLabel("Message to the agent").fill("please escalate this");
  await page.getByRole("button", { name: "Send" }).click();
  await page.locator("#live-turns li", { hasText: "Escalated" }).first().waitFor({ timeout: T });
  log("the agent escalated");

  step = "answer the decision";
  await page.goto(`${BASE}/decisions`);
  const decision = page.locator("article.decision").first();
  await decision.waitFor({ timeout: T });
  check((await decision.textContent()).includes("origin soa"), "the decision shows its SOA origin");
  await shot("05-decisions");
  await decision.getByLabel("Answer").fill("approved");
  await decision.getByLabel("Notes").fill("go ahead");
  await decision.getByRole("button", { name: "Answer" }).click();
  await page.locator("p.note", { hasText: "the agent resumes" }).waitFor({ timeout: T });
  check((await page.locator("#answered").textContent()).includes("approved"), "the answer is listed");
  log("answered; the resume is enqueued");

  step = "resume";
  const deadline = Date.now() + T;
  let resumed = false;
  while (!resumed && Date.now() < deadline) {
    await page.goto(`${BASE}/agents/${SOA}`);
    resumed = (await page.locator("#ledger-turns").textContent()).includes("EscalationResumed");
    if (!resumed) await page.waitForTimeout(500);
  }
  check(resumed, "the ledger shows EscalationResumed");
  log("the agent resumed");

  step = "replay";
  // The greeting turn replayed against another preset from its trace page:
  // a dry run whose greeting is not sent, shown beside the original.
  await page.goto(`${BASE}/agents/${SOA}/turns/1/trace`);
  await page.locator("#replay-preset").selectOption(env("PRESET_A"));
  await page.locator("#replay-form button[type=submit]").click();
  await page.waitForURL(/\/replays\//, { timeout: T });
  const replayDeadline = Date.now() + T;
  let replayStatus = "";
  while (Date.now() < replayDeadline) {
    replayStatus = ((await page.locator("#replay-status").textContent()) || "").trim();
    if (replayStatus === "done" || replayStatus === "failed") break;
    await page.waitForTimeout(500);
    await page.reload();
  }
  check(replayStatus === "done", `the replay finished: ${replayStatus}`);
  const replayed = await page.locator("#replayed").textContent();
  check(replayed.includes("soa_send_message") && replayed.includes("not_executed"),
    `the replayed greeting was not sent: ${replayed}`);
  check((await page.locator("#replay-beside").textContent()).includes("Initialized"),
    "the original decision is shown beside the replay");
  await shot("09-replay");
  log("the greeting turn replayed; nothing with an effect ran");

  step = "mode switch";
  await page.goto(`${BASE}/agents/${SOA}`);
  await page.getByLabel("Mode", { exact: true }).selectOption("Incident");
  await page.getByRole("button", { name: "Switch mode" }).click();
  await page.locator("p.note", { hasText: "Incident" }).waitFor({ timeout: T });
  const audit = await page.locator("#mode-audit tbody tr").first().textContent();
  check(audit.includes("Incident") && audit.includes("ui"), `the audit row names Incident and source ui: ${audit}`);
  check((await page.locator("#agent-mode").textContent()).includes("Incident"), "the mode is Incident");
  await shot("06-agent-mode-audit");
  log("mode switched to Incident; audit row with source ui");

  step = "spend";
  await page.goto(`${BASE}/spend`);
  check((await page.locator("#limit").textContent()).includes("$60.00"), "the weekly ceiling is shown");
  const spent = await page.locator("#spent").textContent();
  // Exactly the billed calls: the scripted provider's calls cost nothing.
  check(spent === env("SPENT_A"), `the billed calls are counted, and only they: ${spent}`);
  check(await page.locator("svg#spend-per-agent").isVisible(), "the per-agent chart is drawn");
  await shot("07-spend");
  log("spend page shows the window and the chart");

  step = "keyboard";
  await page.goto(`${BASE}/agents`);
  await page.keyboard.press("Tab");
  check(await page.evaluate(() => document.activeElement?.classList.contains("skip")), "the first Tab reaches the skip link");

  step = "another tenant";
  const ctxB = await browser.newContext({ viewport: { width: 1366, height: 900 } });
  const pageB = await ctxB.newPage();
  await signIn(pageB, env("TOKEN_B"));
  check(!(await pageB.content()).includes(SOA), "tenant B's /agents does not list A's SOA");
  const resp = await pageB.goto(`${BASE}/agents/${SOA}`);
  check(resp.status() === 404, `A's agent page is not found for B (got ${resp.status()})`);
  await shot("08-other-tenant-not-found", pageB);
  await pageB.goto(`${BASE}/decisions`);
  check((await pageB.locator("#no-open").count()) === 1 && !(await pageB.content()).includes("approved"),
    "tenant B sees none of A's decisions");
  await ctxB.close();
  log("another tenant's operator sees none of it");

  check(consoleErrors.length === 0, `no console errors: ${consoleErrors.join(" | ")}`);
  await browser.close();
  console.log(`browser: ok, ${checks} checks, screenshots in ${OUT}`);
} catch (e) {
  try { await shot("failure"); } catch { /* the page may be gone */ }
  console.error(`browser: FAILED at "${step}": ${e.message}`);
  await browser.close();
  process.exit(1);
}
