// CloudFront Function (runtime cloudfront-js-2.0), viewer request of the web app's default
// behaviour: a deep link into the single-page app (an extension-less path such as /dashboard/usage)
// is served /index.html, so a reload anywhere opens the app. Paths with an extension (/assets/x.js,
// /sw.js) are files and pass unchanged; /api is never rewritten (its own behaviour has no function,
// and this check keeps that true should the function ever be attached there too).
function handler(event) {
    var request = event.request;
    var uri = request.uri;
    if (uri === '/api' || uri.indexOf('/api/') === 0) {
        return request;
    }
    var last = uri.substring(uri.lastIndexOf('/') + 1);
    if (last.indexOf('.') === -1) {
        request.uri = '/index.html';
    }
    return request;
}
