// Loaded between require.js and embed-amd.js. The widget bundle defines several AMD modules
// (@jupyter-widgets/base, /controls, /html-manager/dist/libembed-amd), and whichever injects
// the CSS first looks for the fonts beside its own module, which requirejs would place
// beside the page. Map every one of them to this folder (_static/), so that every page, at
// any depth, loads the fonts from the site itself.
(function () {
  var here = document.currentScript.src;
  var staticDir = here.slice(0, here.lastIndexOf("/"));
  require.config({
    paths: {
      "@jupyter-widgets/html-manager/dist": staticDir,
      "@jupyter-widgets": staticDir,
    },
  });
})();

// ipywidgets typesets widget labels with MathJax 2's API, MathJax.Hub.Queue, whenever
// window.MathJax exists; the site serves MathJax 3, which has no Hub. On pages with math,
// window.MathJax is first MathJax 3's configuration and is replaced when MathJax loads (defer).
// Whatever window.MathJax becomes gets a Hub whose Queue typesets with MathJax 3's
// typesetPromise once that exists, and does nothing before.
(function () {
  if (!window.MathJax) return; // a page without math: ipywidgets skips typesetting
  var current = window.MathJax;
  var hub = {
    Queue: function (command) {
      if (current.typesetPromise) current.typesetPromise([command[2]]);
    },
  };
  current.Hub = hub;
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    get: function () { return current; },
    set: function (value) {
      current = value;
      if (value && !value.Hub) value.Hub = hub;
    },
  });
})();
