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
