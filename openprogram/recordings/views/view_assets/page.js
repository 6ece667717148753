// Expand or fold every call of the page. Nothing from the recording is ever read as markup.
document.documentElement.setAttribute("data-script", "ran");
document.querySelectorAll("button[data-open]").forEach(function (button) {
  button.addEventListener("click", function () {
    var open = button.getAttribute("data-open") === "1";
    document.querySelectorAll("details.call").forEach(function (call) { call.open = open; });
  });
});
