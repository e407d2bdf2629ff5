// hookq admin UI: confirmations that say what will happen to how many, actions on a
// selection that cannot be sent empty (with a box that selects a whole page, and a live
// refresh that waits while something is selected or typed), and a notice while the live
// refresh gets no answer. A file of its own (the CSP allows no inline script);
// without it every page still works, with no confirmation and the server saying when
// nothing was selected.
"use strict";

// The checked letters of a form.
function selectedCount(form) {
  return form.querySelectorAll('input[name="ids"]:checked').length;
}

// The question a button (or form) asks: `data-confirm`, or `data-confirm-one` for a single
// selected item; `{n}` is the number selected, `{delay}` the form's delay as " after 5m",
// `{priority}` the form's priority as typed.
function question(asking, form) {
  const n = selectedCount(form);
  const template =
    n === 1 && asking.dataset.confirmOne ? asking.dataset.confirmOne : asking.dataset.confirm;
  const delayField = form.querySelector('input[name="delay"]');
  const delay = delayField ? delayField.value.trim() : "";
  const priorityField = form.querySelector('input[name="priority"]');
  const priority = priorityField ? priorityField.value.trim() : "";
  return template
    .replaceAll("{n}", String(n))
    .replaceAll("{delay}", delay ? " after " + delay : "")
    .replaceAll("{priority}", priority || "(none given)");
}

document.addEventListener("submit", (event) => {
  const form = event.target;
  const button = event.submitter;
  const asking = button && button.dataset.confirm ? button : form.dataset.confirm ? form : null;
  if (asking && !window.confirm(question(asking, form))) {
    event.preventDefault();
  }
});

// Buttons that act on the selection are disabled while nothing is selected, and the
// form's `[data-selected-count]` says how many are.
function showSelection(form) {
  const n = selectedCount(form);
  for (const button of form.querySelectorAll("button[data-needs-selection]")) {
    button.disabled = n === 0;
  }
  for (const said of form.querySelectorAll("[data-selected-count]")) {
    said.textContent = n === 0 ? said.dataset.none : said.dataset.some.replace("{n}", String(n));
  }
}

// The select-all box of a form ticks or clears every item of its page, and shows whether
// all, some or none are ticked.
function showSelectAll(form) {
  const items = form.querySelectorAll('input[name="ids"]');
  const ticked = selectedCount(form);
  for (const all of form.querySelectorAll("input[data-select-all]")) {
    all.checked = items.length > 0 && ticked === items.length;
    all.indeterminate = ticked > 0 && ticked < items.length;
  }
}

document.addEventListener("change", (event) => {
  const form = event.target.form;
  if (!form || !form.hasAttribute("data-selection")) {
    return;
  }
  if (event.target.hasAttribute("data-select-all")) {
    for (const item of form.querySelectorAll('input[name="ids"]')) {
      item.checked = event.target.checked;
    }
  }
  showSelectAll(form);
  showSelection(form);
});

// Without this script a select-all box could do nothing: it stays hidden until now.
function readySelections(root) {
  for (const all of root.querySelectorAll("input[data-select-all]")) {
    all.hidden = false;
  }
  for (const form of root.querySelectorAll("form[data-selection]")) {
    showSelectAll(form);
    showSelection(form);
  }
}

// Copy buttons (`data-copy`: the text; `data-copy-from`: the id of the element whose text
// to copy) are hidden until this script can make them work.
function readyCopyButtons(root) {
  for (const button of root.querySelectorAll("button[data-copy], button[data-copy-from]")) {
    button.hidden = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  readySelections(document);
  readyCopyButtons(document);
});
document.addEventListener("htmx:load", (event) => {
  readySelections(event.target);
  readyCopyButtons(event.target);
});

// A copy button's text, or the text of the element it names.
function copiedText(button) {
  if (button.dataset.copyFrom) {
    const source = document.getElementById(button.dataset.copyFrom);
    return source ? source.textContent : "";
  }
  return button.dataset.copy || "";
}

// Copy, and say so on the button; where the clipboard refuses (a page not served over
// https or from this machine), say how instead.
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy], button[data-copy-from]");
  if (!button) {
    return;
  }
  const said = (text) => {
    button.textContent = text;
  };
  if (!navigator.clipboard) {
    said("Copy failed: select it and press Ctrl+C");
    return;
  }
  navigator.clipboard.writeText(copiedText(button)).then(
    () => said("Copied"),
    () => said("Copy failed: select it and press Ctrl+C"),
  );
});

// Whether a field inside `root` holds what the user typed or chose but did not send yet.
function isBeingEdited(root) {
  for (const field of root.querySelectorAll("input:not([type=checkbox]):not([type=hidden]), textarea")) {
    if (field.value !== field.defaultValue) {
      return true;
    }
  }
  for (const select of root.querySelectorAll("select")) {
    const initial = Math.max(0, Array.from(select.options).findIndex((o) => o.defaultSelected));
    if (select.selectedIndex !== initial) {
      return true;
    }
  }
  return false;
}

// A live refresh would redraw a list with nothing ticked, or a search box as it was: it
// waits while something is ticked or being typed.
document.addEventListener("htmx:beforeRequest", (event) => {
  const target = event.detail.elt;
  if (
    target &&
    target.querySelector &&
    (target.querySelector('input[name="ids"]:checked') || isBeingEdited(target))
  ) {
    event.preventDefault();
  }
});

// The live refresh's health: the page's `#live-status` notice shows while the server does
// not answer (down, hung past htmx's timeout, or answering with an error) and goes away
// as soon as a refresh succeeds again.
function showLiveStatus(failing) {
  const notice = document.getElementById("live-status");
  if (notice) {
    notice.hidden = !failing;
  }
}

for (const failure of ["htmx:sendError", "htmx:responseError", "htmx:timeout"]) {
  document.addEventListener(failure, () => showLiveStatus(true));
}

document.addEventListener("htmx:afterRequest", (event) => {
  if (event.detail.successful) {
    showLiveStatus(false);
  }
});
