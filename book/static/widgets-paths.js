// Loaded between require.js and embed-amd.js. The widget bundle finds its fonts next to its
// own AMD module, which requirejs would place beside the page; point it at this folder
// (_static/) instead, so that every page, at any depth, loads them from the site itself.
(function () {
  var here = document.currentScript.src;
  require.config({
    paths: { "@jupyter-widgets/html-manager/dist": here.slice(0, here.lastIndexOf("/")) },
  });
})();
