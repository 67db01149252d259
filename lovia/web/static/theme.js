// Light or dark: the user's pick in the sidebar's Theme menu (kept in localStorage), else the
// system preference, followed live. The effective theme lives on <html data-theme>, which the
// design tokens key on; the page's head applies a stored pick before the first paint.

export const THEME_KEY = "lovia_theme";
const CHOICES = ["light", "dark"];
const query = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
const listeners = new Set();
let unsaved = null; // the pick, when localStorage refuses to keep it (a private window)

/** The user's pick: "light", "dark", or null for "Automatic" (follow the system). */
export function chosenTheme() {
  try {
    const value = localStorage.getItem(THEME_KEY);
    return CHOICES.includes(value) ? value : null;
  } catch (_e) {
    return unsaved;
  }
}

export const systemTheme = () => (query && query.matches ? "dark" : "light");

/** The theme in effect now. */
export const currentTheme = () => {
  const value = document.documentElement.dataset.theme;
  return CHOICES.includes(value) ? value : systemTheme();
};

/** Call `fn(theme)` each time the theme in effect changes; returns the function that stops it. */
export function onThemeChange(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

let applied = null;

/** Put the effective theme on <html>; listeners hear of it only when it changed. */
export function applyTheme() {
  const theme = chosenTheme() || systemTheme();
  document.documentElement.dataset.theme = theme;
  const before = applied;
  applied = theme;
  if (before === null || before === theme) return;
  for (const fn of [...listeners]) {
    try {
      fn(theme);
    } catch (error) {
      console.error("lovia: a theme listener failed", error);
    }
  }
}

/** Remember the user's pick (null: Automatic) and apply it at once. */
export function setTheme(choice) {
  unsaved = CHOICES.includes(choice) ? choice : null;
  try {
    if (unsaved) localStorage.setItem(THEME_KEY, unsaved);
    else localStorage.removeItem(THEME_KEY);
  } catch (_e) {
    // not kept: the pick holds for this page only
  }
  applyTheme();
}

applied = currentTheme();
applyTheme();
query?.addEventListener?.("change", applyTheme); // Automatic follows the system live
window.addEventListener("storage", (event) => {
  if (event.key === THEME_KEY || event.key === null) applyTheme(); // a pick made in another tab
});

/** Fill the Theme menu (Automatic, Light, Dark) and apply a pick as it is made. */
export function bindThemePicker(select, t) {
  if (!select) return;
  select.replaceChildren(
    new Option(t("settings.automatic"), ""),
    new Option(t("settings.themeLight"), "light"),
    new Option(t("settings.themeDark"), "dark"),
  );
  select.value = chosenTheme() || "";
  select.onchange = () => setTheme(select.value || null);
  onThemeChange(() => { select.value = chosenTheme() || ""; }); // a pick made in another tab
}
