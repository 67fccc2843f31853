// web/dist/vendor/vendor.js is esbuild's bundle of web/js/vendor-entry.js: its exports
export * from "../../js/vendor-entry.js";
