/* The sidebar buttons of the article's header (the ones a reader sees) do what the theme binds.
 *
 * The theme packages pinned together (sphinx-book-theme 1.3.0, pydata-sphinx-theme 0.17.1) render two
 * buttons of each class, .primary-toggle and .secondary-toggle: one in the site's header, hidden by the
 * book theme, and one in the article's header. Both themes bind the first found in the page
 * (document.querySelector), the hidden one, so the visible button opened nothing on a phone and collapsed
 * nothing on a desktop (pydata-sphinx-theme issue 2451). A click on a later button is handed to the first:
 * on a wide window the book theme's handler there hides or shows the sidebar, on a narrow one
 * pydata-sphinx-theme's opens the sidebar as a dialog. */
document.addEventListener("DOMContentLoaded", () => {
  for (const kind of [".primary-toggle", ".secondary-toggle"]) {
    const [bound, ...others] = document.querySelectorAll(kind);
    for (const button of others) {
      button.addEventListener("click", (event) => {
        event.preventDefault();
        event.stopPropagation();
        bound.click();
      });
    }
  }
});

/* Search results quote the text of a page around the words found, read from the page's HTML, where a formula
 * is still its TeX source ("\(\operatorname{softmax}(QK^\top / \sqrt{d_k})\)"). The quotes give each formula
 * as plain text instead ("softmax(QKᵀ / √d_k)"): commands that name a symbol become it, those that only
 * style or space their argument keep the argument, the rest and the braces go. */
const TEX_SYMBOLS = {
  alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε", theta: "θ", lambda: "λ",
  mu: "μ", pi: "π", rho: "ρ", sigma: "σ", tau: "τ", phi: "φ", omega: "ω", Delta: "Δ", Sigma: "Σ",
  top: "ᵀ", cdot: "·", cdots: "⋯", ldots: "…", dots: "…", times: "×", in: "∈", le: "≤", leq: "≤", ge: "≥",
  geq: "≥", ne: "≠", neq: "≠", approx: "≈", sim: "~", to: "→", rightarrow: "→", infty: "∞", sum: "Σ",
  prod: "Π", sqrt: "√", partial: "∂", nabla: "∇", odot: "⊙", otimes: "⊗", log: "log", exp: "exp", max: "max",
  min: "min",
};
function texAsText(tex) {
  return tex
    .trim()
    .replace(/^\\[([]|\\[)\]]$/g, "")
    .replace(/\\mathbb\{R\}/g, "ℝ")
    .replace(/\\frac\{([^{}]*)\}\{([^{}]*)\}/g, "($1)/($2)")
    .replace(/\\[a-zA-Z]+/g, (command) => TEX_SYMBOLS[command.slice(1)] ?? "")
    .replace(/\\./g, " ")
    .replace(/[{}]/g, "")
    .replace(/\s+/g, " ")
    .trim();
}
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined") return; // only the search page loads Sphinx's search
  const pageText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll(".math").forEach((formula) => {
      formula.textContent = texAsText(formula.textContent);
    });
    return pageText(page.documentElement.outerHTML, anchor);
  };
});
