// What a person sees: the invalidations page of the demo's a100 upgrade, one invalidated row
// followed to its compare view, the cause shown. Screenshots go to $SCREENSHOTS.
// Usage: BASE=http://127.0.0.1:PORT SCREENSHOTS=dir node explain.mjs
import { chromium } from "playwright-core";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";

const base = process.env.BASE ?? "http://127.0.0.1:8600";
const shots = process.env.SCREENSHOTS ?? "target/screenshots";
mkdirSync(shots, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
let failed = false;
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(`console error: ${m.text()} (${page.url()})`); });
  page.on("response", (r) => { if (r.status() >= 400) errors.push(`HTTP ${r.status()}: ${r.url()}`); });

  await page.goto(`${base}/invalidations?machine=a100-1`);
  const summary = await page.textContent("#summary");
  assert.match(summary, /45 of 45 kernels recompiled after Triton 3\.4\.0 → 3\.5\.1; 0 had identical binaries/);
  assert.equal(await page.locator("tr.inv-row").count(), 45);
  assert.ok(await page.isVisible("#scan-picker"), "scan picker shown");
  assert.match(await page.textContent("#relocated"), /Triton will miss on them/);
  await page.screenshot({ path: `${shots}/explain-invalidations.png`, fullPage: false });

  // Follow one invalidated row (a matmul, the most interesting IR) to its compare view.
  const row = page.locator("tr.inv-row", { hasText: "matmul_kernel" }).first();
  const kernel = (await row.locator("td").first().textContent()).trim();
  await Promise.all([page.waitForURL(/\/compare\?a=a100-1:.*&b=a100-1:/), row.locator("a.compare").click()]);
  const headline = await page.textContent("#headline");
  assert.match(headline, /compiler/i, "cause shown");
  assert.match(headline, /Triton 3\.4\.0 → 3\.5\.1/);
  assert.match(await page.textContent("body"), new RegExp(kernel));
  const first = page.locator("#components tr").nth(1);
  assert.match(await first.textContent(), /triton_version/, "differing key input first");
  assert.match((await first.getAttribute("class")) ?? "", /differs/, "highlighted");
  assert.ok((await page.locator("table.diff tr").count()) > 3, "IR diff shown");
  await page.screenshot({ path: `${shots}/explain-compare.png`, fullPage: false });

  // Another IR through htmx: the URL changes (shareable) and the diff is swapped in.
  await page.click("p.picker a:text-is('ptx')");
  await page.waitForURL(/ir=ptx/);
  await page.waitForFunction(() => document.querySelector("#ir")?.textContent.includes(".ptx"));
  await page.locator("#ir").scrollIntoViewIfNeeded();
  await page.evaluate(() => document.querySelector("#ir").scrollIntoView());
  await page.screenshot({ path: `${shots}/explain-compare-ptx.png`, fullPage: false });
  // A's nearest neighbours: ranked, each linking to its compare view.
  const href = await page.locator("a", { hasText: "A's nearest neighbours" }).getAttribute("href");
  const resp = await page.goto(`${base}${href}`);
  assert.equal(resp.status(), 200, `GET ${href}`);
  const rows = page.locator("#neighbours tr");
  assert.ok((await rows.count()) > 2, "neighbours listed");
  assert.match(await rows.nth(1).textContent(), /compare/, "each neighbour links to its compare view");
  await page.screenshot({ path: `${shots}/explain-nearest.png`, fullPage: false });
  assert.deepEqual(errors, [], "no page errors, console errors or failed requests");
  console.log(`ok: invalidations → compare of ${kernel}: ${headline.trim().replace(/\s+/g, " ")}`);
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
