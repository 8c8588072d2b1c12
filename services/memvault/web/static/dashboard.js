// memvault's one script: copy buttons. Every page works without it; with it, a button
// <button data-copy="ID"> copies the text of the element with that id.
"use strict";
document.addEventListener("click", function (event) {
  var button = event.target.closest("button[data-copy]");
  if (!button) return;
  event.preventDefault();
  var source = document.getElementById(button.getAttribute("data-copy"));
  if (!source || !navigator.clipboard) return;
  var text = source.value !== undefined && source.tagName !== "CODE" && source.tagName !== "PRE"
    ? source.value : source.textContent;
  navigator.clipboard.writeText(text.trim()).then(function () {
    var label = button.textContent;
    button.textContent = "Copied";
    button.setAttribute("data-copied", "true");
    setTimeout(function () { button.textContent = label; }, 1500);
  });
});
