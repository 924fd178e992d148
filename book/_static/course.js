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

/* A site opened from its folder (file://): the search quotes each result's page, which Sphinx's search fetches,
 * and a browser refuses any fetch of a file:// address (a CORS error: titles only). The build writes each page's
 * text into a script of its own, _static/search-pages/<page>.js (course_site/reading.py); here, under file://
 * only, a fetch of one of the site's pages loads that page's script (a script loads where a fetch may not) and is
 * answered with its text. Served over HTTP (make serve), nothing changes and no such script is loaded. Set at
 * once, before the search runs. */
if (window.location.protocol === "file:") {
  const root = new URL(document.documentElement.dataset.content_root || "./", window.location.href);
  const browserFetch = window.fetch.bind(window);
  const texts = {}; // page -> the promise of its text (undefined where it has no script)
  const pageText = (page) =>
    (texts[page] ??= new Promise((resolve) => {
      const script = document.createElement("script");
      script.src = new URL(`_static/search-pages/${page}.js`, root).href;
      script.onload = () => resolve(window.COURSE_SEARCH_PAGES?.[page]);
      script.onerror = () => resolve(undefined);
      document.head.append(script);
    }));
  window.fetch = (resource, options) => {
    const address = new URL(resource instanceof Request ? resource.url : String(resource), window.location.href);
    const page = decodeURIComponent(address.pathname.slice(root.pathname.length));
    if (address.protocol !== "file:" || !address.pathname.startsWith(root.pathname) || !page.endsWith(".html")) {
      return browserFetch(resource, options);
    }
    return pageText(page).then((text) =>
      text === undefined
        ? browserFetch(resource, options)
        : new Response(text, { headers: { "Content-Type": "text/html; charset=utf-8" } }),
    );
  };
}

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

/* Result figures fit the column (course.css); one drawn smaller than its own size can be opened at full size:
 * a click or a tap on it, or Enter or Space once it has the focus (it is a button then, in the order of tabs),
 * shows it in a dialog over the page, which scrolls where the figure is wider than the window. Escape, a click
 * anywhere in the dialog or its Close button closes it, and the focus goes back to the figure. */
document.addEventListener("DOMContentLoaded", () => {
  const figures = Array.from(document.querySelectorAll("article div.cell_output img"));
  if (!figures.length) return;
  let dialog = null; // made when a figure is first opened; its image only while it is open
  let opener = null;
  const open = (figure) => {
    if (!dialog) {
      dialog = document.createElement("dialog");
      dialog.className = "course-zoom";
      dialog.setAttribute("aria-label", "The figure at its full size");
      const close = document.createElement("button");
      close.type = "button";
      close.className = "course-zoom-close";
      close.textContent = "Close";
      dialog.append(close);
      dialog.addEventListener("click", () => dialog.close());
      dialog.addEventListener("close", () => {
        dialog.querySelector("img")?.remove();
        opener?.focus();
        opener = null;
      });
      document.body.append(dialog);
    }
    opener = figure;
    const full = document.createElement("img");
    full.src = figure.currentSrc || figure.src;
    full.alt = figure.alt;
    dialog.append(full);
    dialog.showModal();
    dialog.querySelector(".course-zoom-close").focus();
  };
  // A figure is shown smaller than its own size (scaled to the column): it opens; otherwise it is only an image.
  const update = (figure) => {
    const shrunk = figure.naturalWidth > 0 && figure.getBoundingClientRect().width < figure.naturalWidth - 1;
    figure.classList.toggle("course-zoomable", shrunk);
    if (shrunk) {
      figure.setAttribute("role", "button");
      figure.setAttribute("tabindex", "0");
      figure.setAttribute("aria-label", `Open the figure at its full size: ${figure.alt}`);
    } else {
      for (const name of ["role", "tabindex", "aria-label"]) figure.removeAttribute(name);
    }
  };
  const sizes = new ResizeObserver((entries) => entries.forEach((entry) => update(entry.target)));
  window.addEventListener("resize", () => figures.forEach(update));
  for (const figure of figures) {
    sizes.observe(figure);
    figure.addEventListener("load", () => update(figure));
    figure.addEventListener("click", () => {
      if (figure.classList.contains("course-zoomable")) open(figure);
    });
    figure.addEventListener("keydown", (event) => {
      if (figure.classList.contains("course-zoomable") && (event.key === "Enter" || event.key === " ")) {
        event.preventDefault();
        open(figure);
      }
    });
  }
});

/* Code names, in tables and in the text, break only between their words (course.css): a break opportunity
 * (<wbr>) after each underscore, dot or slash, and where a lower-case letter or a digit meets a
 * capital (code blocks, <pre>, are left as they are). A table's box that
 * scrolls sideways (the table is wider than the column) says so (.course-scrolls) and takes the focus, so
 * that the keyboard scrolls it too; it is marked again whenever the box or its table changes size. */
const NAME_BREAKS = /(?<=[_./])(?=.)|(?<=[a-z0-9])(?=[A-Z])/g;
document.addEventListener("DOMContentLoaded", () => {
  for (const code of document.querySelectorAll("article code")) {
    if (code.closest("pre")) continue;
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    const texts = [];
    while (walker.nextNode()) texts.push(walker.currentNode);
    for (const text of texts) {
      const parts = text.data.split(NAME_BREAKS);
      if (parts.length < 2) continue;
      const pieces = parts.flatMap((part, i) => (i ? [document.createElement("wbr"), part] : [part]));
      text.replaceWith(...pieces);
    }
  }
  const boxes = Array.from(document.querySelectorAll("article .pst-scrollable-table-container"));
  const mark = () => {
    for (const box of boxes) {
      const scrolls = box.scrollWidth > box.clientWidth + 1;
      box.classList.toggle("course-scrolls", scrolls);
      if (scrolls) box.setAttribute("tabindex", "0");
      else box.removeAttribute("tabindex");
    }
  };
  mark();
  window.addEventListener("load", mark);
  window.addEventListener("resize", mark);
  // A table's width changes without the window's when MathJax typesets its formulas (after the page has loaded):
  // marked again then too.
  if ("ResizeObserver" in window) {
    const observer = new ResizeObserver(mark);
    for (const box of boxes) {
      observer.observe(box);
      const table = box.querySelector("table");
      if (table) observer.observe(table);
    }
  }
});
