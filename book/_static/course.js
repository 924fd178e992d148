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
